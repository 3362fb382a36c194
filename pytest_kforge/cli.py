"""The ``kforge`` console script: the product's usage line, made to work.

``pytest --kernel mla --version v4`` runs nothing: pytest answers a command line holding exactly
one ``--version`` by printing its own version and exiting 0 before any plugin loads.  ``kforge``
accepts that form, rewrites it and hands over to ``pytest.main``::

    kforge --kernel mla --version v4 -x        ->  pytest --kernel mla --kernel-version v4 -x
    kforge --version=v4,v5                     ->  pytest --kernel <default_kernel> --kernel-version v4,v5
    kforge --version                           ->  prints pytest-kforge's version

``kforge new-kernel NAME [--kernels-dir DIR] [--force]`` scaffolds a kernel (:mod:`pytest_kforge.scaffold`).
Everything else is passed to pytest unchanged.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

__all__ = ["main", "rewrite_args"]

_VERSION_VALUE = re.compile(r"^(all|v\d+(_[a-z0-9_]+)?)(,(all|v\d+(_[a-z0-9_]+)?))*$")


class CliError(ValueError):
    """A command line kforge cannot rewrite (the message is one sentence)."""


def rewrite_args(argv: Sequence[str], default_kernel: str | None = None) -> list[str]:
    """The pytest arguments for a kforge command line (see the module docstring)."""
    out: list[str] = []
    has_kernel = False
    saw_version = False
    i = 0
    args = list(argv)
    while i < len(args):
        a = args[i]
        if a == "--":  # everything after is pytest's, verbatim
            out.extend(args[i:])
            break
        if a in ("--kernel",) or a.startswith("--kernel="):
            has_kernel = True
        if a == "--version" or a.startswith("--version="):
            if "=" in a:
                value = a.split("=", 1)[1]
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                value = args[i + 1]
                i += 1
            else:
                raise CliError("--version needs a kernel version like v4, v4,v5 or all "
                               "(for kforge's own version run `kforge --version` alone)")
            if not _VERSION_VALUE.match(value):
                raise CliError(f"--version expects versions like v4, v4,v5 or all, got {value!r}")
            out += ["--kernel-version", value]
            saw_version = True
        else:
            out.append(a)
        i += 1
    if saw_version and not has_kernel:
        if not default_kernel:
            raise CliError("--version needs --kernel NAME (or default_kernel in [tool.kforge])")
        out = ["--kernel", default_kernel, *out]
    return out


def _default_kernel() -> str | None:
    from pathlib import Path

    from .config import load_config
    from .errors import ConfigError

    try:
        return load_config(Path.cwd()).default_kernel
    except ConfigError:
        return None  # pytest reports the bad config itself


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kforge`` script; returns pytest's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "new-kernel":
        from . import scaffold

        return scaffold.main(args[1:])
    if args == ["--version"]:
        from . import __version__

        print(f"pytest-kforge {__version__}")
        return 0
    try:
        pytest_args = rewrite_args(args, _default_kernel())
    except CliError as exc:
        print(f"kforge: error: {exc}", file=sys.stderr)
        return 4  # pytest's usage-error code
    import pytest

    return int(pytest.main(pytest_args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
