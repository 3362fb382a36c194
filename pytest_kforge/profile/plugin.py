"""pytest plugin (entry point ``kforge_profile``): ``--kforge-profile`` and its options.

    pytest --kernel mla --kernel-version v1 --kforge-profile [--kforge-baseline v0]

After the suite ran, every selected version whose correctness tests did not fail is profiled on
every selected trial config: a subprocess runs it under ncu (this pytest process never does),
and ``reports/<kernel>/<version>/<trial>.md`` (+ ``.json.gz``, ``.ncu-rep``) and the devlog's
``perf`` block are written.  Each trial gets one line in the terminal summary; faults (ncu
missing, no counter permission, nothing matched, timeout, crash) are lines, never errors.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

__all__ = ["PROFILE_KEY"]

PROFILE_KEY = pytest.StashKey[list[str]]()


def _version(value: str) -> str:
    if not re.fullmatch(r"v\d+(?:_[a-z0-9_]+)?", value):
        raise argparse.ArgumentTypeError(f"expected a version like 'v3', got {value!r}")
    return value


def _seconds(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not x > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return x


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kforge", "kforge: optimise a GPU kernel version by version (pytest-kforge)")
    g.addoption("--kforge-profile", action="store_true", default=False,
                help="after the suite, profile each selected version on each trial config under ncu and write "
                     "reports/<kernel>/<version>/<trial>.md|.json.gz|.ncu-rep (needs a GPU and ncu)")
    g.addoption("--kforge-baseline", metavar="VERSION", type=_version, default=None,
                help="version whose saved profile the report compares with (default: the version's PARENT)")
    g.addoption("--kforge-ncu", metavar="PATH", default=None,
                help="the ncu executable (default: $KFORGE_NCU, else ncu on PATH)")
    g.addoption("--kforge-ncu-timeout", metavar="SECONDS", type=_seconds, default=300.0,
                help="limit for one ncu run (one version on one trial config). Default: %(default)r")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("kforge_profile") and not config.getoption("kernel", None):
        raise pytest.UsageError("--kforge-profile needs --kernel NAME (e.g. --kernel mla --kernel-version v1 "
                                "--kforge-profile)")


def _session(config: pytest.Config) -> Any:
    try:
        from pytest_kforge.session import SESSION_KEY
    except ImportError:
        return None
    return config.stash.get(SESSION_KEY, None)


def plan(ks: Any) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """``([(version, trials)], lines)``: what to profile and why anything is left out."""
    sel = ks.selection
    failed = {c["version"] for c in getattr(ks, "correctness", []) if not c.get("passed", True)}
    todo, lines = [], []
    for v in sel.versions:
        if v.name in failed:
            lines.append(f"kforge profile {sel.kernel.name} {v.name}: not profiled: it failed correctness; "
                         f"fix that first")
            continue
        todo.append((v.name, [t.name for t in sel.trials]))
    return todo, lines


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("kforge_profile") or hasattr(config, "workerinput"):
        return
    ks = _session(config)
    lines: list[str] = []
    config.stash[PROFILE_KEY] = lines
    if ks is None or getattr(ks, "selection", None) is None:
        lines.append("kforge profile: nothing selected (needs --kernel with the kforge plugin loaded)")
        return
    if not getattr(ks, "on_gpu", False):
        lines.append("kforge profile: skipped: no CUDA GPU in this run (ncu profiles GPU kernels); "
                     "run on a GPU machine")
        return
    from .run import profile_version

    todo, lines[:] = plan(ks)
    sel = ks.selection
    params = {t.name: dict(t.params) for t in sel.trials}
    for version, trials in todo:
        bench = {r.trial: r.median_us for r in ks.results if r.version == version and r.median_us}
        outcomes = profile_version(sel.kernel.name, version, trials, root=config.rootpath,
                                   kernels_dir=sel.kernel.path.parent, ncu=config.getoption("kforge_ncu"),
                                   timeout_s=config.getoption("kforge_ncu_timeout"),
                                   baseline=config.getoption("kforge_baseline"),
                                   roofline=getattr(ks, "roofline", None), params=params, bench_us=bench)
        lines.extend(o.line() for o in outcomes)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lines = config.stash.get(PROFILE_KEY, None)
    if lines:
        terminalreporter.section("kforge profile")
        for line in lines:
            terminalreporter.write_line(line)
