"""Scaffold a new kernel: ``kernels/NAME/`` with a working spec, fuzz strategy and torch baseline.

Usage::

    python -m pytest_kforge.scaffold NAME [--kernels-dir DIR] [--force]
    kforge new-kernel NAME [--kernels-dir DIR] [--force]

writes::

    kernels/NAME/spec.py          SPEC, a KernelSpec subclass (a working example: y = x * scale)
    kernels/NAME/fuzz.py          hypothesis_params(spec, *, small): the shapes test_fuzz tries
    kernels/NAME/versions/v0.py   the torch baseline (LANGUAGE, PARENT, DESCRIPTION, CONFIG, run)
    kernels/NAME/README.md        what each file holds and the commands to run
    docs/kernels/NAME.md          the devlog: overview, current best, peers, latest profile, versions

so that ``pytest --kernel NAME --kernel-version v0`` passes at once on CPU; every part to replace
with your own kernel's is marked "FILL IN".  ``kernels_dir`` defaults to the project's (``[tool.kforge]``
of pyproject.toml or ``kforge.toml``, else ``./kernels``); the devlog goes under ``docs/kernels/`` of
the folder that configuration sits in (else the working directory), where the orchestrator reads it.

A name must be a lower-case Python identifier that is not a keyword, not reserved (``pytest_kforge``,
``kforge_kernels``, ...) and not an existing kernel; no existing file is overwritten unless
``--force`` is given.  Refusals print one sentence and exit 2.  The templates are the files under
``pytest_kforge/templates/kernel/`` (``string.Template``: ``$name``, ``$Class``).
"""

from __future__ import annotations

import argparse
import dataclasses
import keyword
import re
import string
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from .registry import VERSION_RE

__all__ = ["ScaffoldError", "Plan", "validate_name", "plan", "write", "scaffold", "main"]

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
#: names a kernel folder may not take: the package, the synthetic kernels package, the tools it imports
RESERVED = frozenset({
    "pytest_kforge", "kforge", "kforge_kernels", "pytest", "torch", "hypothesis", "cuda", "cutlass",
    "triton", "numpy", "test", "tests", "versions", "templates", "all",
})
MAX_NAME = 40
#: template file -> where it goes, relative to the kernel folder ("{docs}" for the devlog)
FILES: dict[str, str] = {
    "spec.py.tmpl": "spec.py",
    "fuzz.py.tmpl": "fuzz.py",
    "v0.py.tmpl": "versions/v0.py",
    "README.md.tmpl": "README.md",
    "devlog.md.tmpl": "{docs}",
}


class ScaffoldError(ValueError):
    """A kernel that cannot be scaffolded (the message is one sentence: what is wrong, what to do)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What :func:`write` will write: the kernel's name, its folder and each file's path and text."""

    name: str
    kernel_dir: Path
    files: dict[Path, str]


def validate_name(name: str, kernels_dir: Path | None = None, *, force: bool = False) -> str:
    """``name`` when it can be a new kernel under ``kernels_dir``, else :class:`ScaffoldError`."""
    if not _NAME_RE.match(name or ""):
        raise ScaffoldError(f"kernel name {name!r} must be a lower-case Python identifier (a letter, then "
                            f"letters, digits or _), like 'rowsum' or 'layer_norm'")
    if len(name) > MAX_NAME:
        raise ScaffoldError(f"kernel name {name!r} is {len(name)} characters long; use at most {MAX_NAME}")
    if keyword.iskeyword(name):
        raise ScaffoldError(f"kernel name {name!r} is a Python keyword, so versions could not import it; "
                            f"pick another name, e.g. '{name}_op'")
    if name in RESERVED:
        raise ScaffoldError(f"kernel name {name!r} is reserved (it would shadow a package or a folder kforge "
                            f"uses); pick another name, e.g. '{name}_kernel'")
    if kernels_dir is not None and not force and (Path(kernels_dir) / name / "spec.py").exists():
        raise ScaffoldError(f"kernel {name!r} already exists in {Path(kernels_dir) / name}; pick another name, "
                            f"or pass --force to overwrite its scaffold files")
    return name


def class_name(name: str) -> str:
    """The spec class of kernel ``name``: ``layer_norm`` -> ``LayerNormSpec``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) + "Spec"


def _template(filename: str) -> string.Template:
    text = resources.files("pytest_kforge").joinpath("templates", "kernel", filename).read_text(encoding="utf-8")
    return string.Template(text)


def plan(name: str, kernels_dir: Path, docs_dir: Path, *, force: bool = False) -> Plan:
    """The files of kernel ``name``: under ``kernels_dir/name/``, and its devlog ``docs_dir/name.md``.

    Raises :class:`ScaffoldError` for a bad name, or (without ``force``) when any of the files exists.
    """
    validate_name(name, kernels_dir, force=force)
    kernel_dir = Path(kernels_dir) / name
    values = {"name": name, "Class": class_name(name)}
    files: dict[Path, str] = {}
    for tmpl, rel in FILES.items():
        path = Path(docs_dir) / f"{name}.md" if rel == "{docs}" else kernel_dir / rel
        files[path] = _template(tmpl).substitute(values)
    flat = sorted(f.name for f in kernel_dir.glob("v*.py") if VERSION_RE.match(f.stem))
    if flat and not (kernel_dir / "versions").is_dir():
        raise ScaffoldError(f"{kernel_dir} keeps its versions beside spec.py ({', '.join(flat)}), and the scaffold's "
                            f"versions/ folder would hide them from the registry; move them into versions/ first")
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise ScaffoldError(f"{', '.join(str(p) for p in existing)} already exist{'s' if len(existing) == 1 else ''}, "
                            f"and the scaffold never overwrites your files; move them away or pass --force")
    for p in files:
        if p.exists() and not p.is_file():
            raise ScaffoldError(f"{p} is not a regular file; remove it to scaffold {name!r} here")
    return Plan(name, kernel_dir, files)


def write(p: Plan) -> list[Path]:
    """Write ``p``'s files (creating their folders); returns the paths written, in order."""
    for path, text in p.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(p.files)


def scaffold(name: str, kernels_dir: Path, docs_dir: Path, *, force: bool = False) -> list[Path]:
    """Plan and write kernel ``name`` (see the module docstring); returns the paths written."""
    return write(plan(name, kernels_dir, docs_dir, force=force))


def project_dirs(cwd: Path, kernels_dir: Path | None) -> tuple[Path, Path]:
    """(kernels folder, devlog folder) for a scaffold run from ``cwd``: the configured ones, or ``--kernels-dir``."""
    from .config import load_config

    cfg = load_config(cwd)
    root = cfg.source.parent if cfg.source is not None else cwd
    return (kernels_dir if kernels_dir is not None else cfg.kernels_dir), root / "docs" / "kernels"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kforge new-kernel",
        description="Scaffold kernels/NAME/ (spec, fuzz strategy, torch baseline v0, README) and its devlog "
                    "docs/kernels/NAME.md, ready for `pytest --kernel NAME --kernel-version v0`.")
    ap.add_argument("name", metavar="NAME", help="the kernel's name: a lower-case Python identifier, e.g. rowsum")
    ap.add_argument("--kernels-dir", metavar="DIR", type=Path, default=None,
                    help="where kernel folders live (default: kernels_dir of [tool.kforge], else ./kernels)")
    ap.add_argument("--force", action="store_true", help="overwrite the scaffold's files where they exist")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_kforge.scaffold`` and ``kforge new-kernel``; 0 on success, 2 refused."""
    from .errors import ConfigError

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    cwd = Path.cwd()
    try:
        kernels_dir, docs_dir = project_dirs(cwd, args.kernels_dir)
        written = scaffold(args.name, kernels_dir, docs_dir, force=args.force)
    except (ScaffoldError, ConfigError) as exc:
        print(f"kforge new-kernel: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kforge new-kernel: error: cannot write the scaffold ({exc}); check the folder's permissions",
              file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {_shown(path, cwd)}")
    print(f"next: fill in the FILL IN parts of {_shown(written[0], cwd)}, then run "
          f"`pytest --kernel {args.name} --kernel-version v0` (passes on CPU as generated)")
    return 0


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
