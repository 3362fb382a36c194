"""Test fakes (kept out of the installed package) for the loop without a GPU: a suite runner with scripted timings
and a toy project.

:class:`FakeSuiteRunner` writes a results JSON in the harness's schema from a table of timings, so
EVALUATE, LEARN and the summary see exactly what a real VERIFY would give them.  ``kill_on`` makes a
chosen call raise :class:`SimulatedKill` (a ``BaseException``, like a SIGKILL's effect on the
process: no step bookkeeping runs), to test ``--resume``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_kforge.orchestrate.suite import DEFAULT_TRIALS, SuiteOutcome

__all__ = ["SimulatedKill", "FakeSuiteRunner", "make_toy_project", "write_toy_best", "TOY_SPEC", "TOY_V1",
           "isolated_kernel_modules", "fake_gpu_cli", "toy_with_results"]


@contextlib.contextmanager
def isolated_kernel_modules() -> Iterator[None]:
    """Give back ``kforge_kernels.*`` as it was and drop the registry's caches, so a test that loads
    a temporary kernels folder leaves the real one importable for the tests after it."""
    from pytest_kforge import registry

    def ours() -> list[str]:
        return [k for k in sys.modules if k == "kforge_kernels" or k.startswith("kforge_kernels.")]

    saved = {k: sys.modules[k] for k in ours()}
    try:
        yield
    finally:
        for k in ours():
            del sys.modules[k]
        sys.modules.update(saved)
        registry._load_kernel.cache_clear()
        registry._version_cache.clear()


class SimulatedKill(BaseException):
    """Stands for the process being killed in the middle of a step."""


class FakeSuiteRunner:
    def __init__(self, timings: dict[str, dict[str, float]], *, spread_pct: float = 1.0,
                 incorrect: tuple[str, ...] = (), kill_on: int | None = None, notes: dict[str, str] | None = None,
                 floors: dict[str, float] | None = None) -> None:
        self.timings, self.spread, self.incorrect = timings, spread_pct, incorrect
        self.kill_on = kill_on
        self.notes = notes or {}
        self.floors = floors or {"decode": 46.2, "spec": 739.4}
        self.calls: list[list[str]] = []

    def run_suite(self, kernel: str, versions: list[str], *, out_json: Path, timeout_s: float,
                  trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome:
        self.calls.append(list(versions))
        if self.kill_on is not None and len(self.calls) == self.kill_on:
            raise SimulatedKill(f"killed during suite call {self.kill_on}")
        rows, corr = [], []
        for v in versions:
            ok = v not in self.incorrect
            corr.append({"version": v, "test": f"tests/test_{kernel}.py::test_correct[{v}]", "passed": ok,
                         "message": "" if ok else "out max_abs 0.5 > 3e-2"})
            for t in trials:
                us = self.timings.get(v, {}).get(t)
                floor = self.floors.get(t, 1.0)
                rows.append({"version": v, "language": "", "parent": None, "trial": t, "id": t, "params": {},
                             "note": self.notes.get(f"{v}:{t}", ""), "correct": ok,
                             "median_us": us, "min_us": us, "iqr_us": 0.1, "spread_pct": self.spread, "rounds": 50,
                             "tflops": 0.0, "gbps": 0.0, "pct_floor": None if us is None else round(100 * floor / us, 1),
                             "floor_us": floor, "error": None})
        results = {"kernel": kernel, "gpu": "fake", "started": "", "roofline": {"tbs": 4.3, "tflops": 790},
                   "results": rows, "correctness": corr}
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(results), encoding="utf-8")
        return SuiteOutcome(True, results, "ok", f"fake-suite {kernel} {','.join(versions)}", 1.0)

    def profile(self, kernel: str, version: str, *, out_dir: Path, timeout_s: float,
                trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome:
        return SuiteOutcome(False, None, "the fake runner does not profile", "fake-profile", 0.0)


TOY_SPEC = '''
from pytest_kforge.spec import KernelSpec, Tolerance


class ToySpec(KernelSpec):
    name = "toy"
    input_names = ("x",)
    output_names = ("y",)
    trials = {"decode": {"b": 32, "s": 1, "t": 4096, "h": 128}, "spec": {"b": 32, "s": 16, "t": 4096, "h": 128}}
    default_trials = ("decode", "spec")
    tolerances = {"y": Tolerance(max_abs=1e-2, rel_l2=1e-2)}

    def flops(self, params):
        return 1.0

    def min_bytes(self, params):
        return 1.0


SPEC = ToySpec()
'''

TOY_V0 = '''LANGUAGE = "torch"
PARENT = None
DESCRIPTION = "toy reference"
CONFIG = {}


def run(x, *, y, config=None):
    return (y,)
'''

TOY_V1 = '''LANGUAGE = "cutile-dsl"
PARENT = "v0"
DESCRIPTION = "toy tiled version"
CONFIG = {"BLOCK_N": 64, "NUM_SPLITS": 4}


def run(x, *, y, config=None):
    y.append(dict(config or {}))
    return (y,)
'''


def make_toy_project(root: Path, *, devlog: str | None = None) -> Path:
    """``root`` with kernels/toy (v0 torch, v1 cutile-dsl with CONFIG) and docs/kernels/toy.md."""
    k = root / "kernels" / "toy"
    k.mkdir(parents=True, exist_ok=True)
    (k / "spec.py").write_text(TOY_SPEC, encoding="utf-8")
    (k / "v0.py").write_text(TOY_V0, encoding="utf-8")
    (k / "v1.py").write_text(TOY_V1, encoding="utf-8")
    d = root / "docs" / "kernels"
    d.mkdir(parents=True, exist_ok=True)
    (d / "toy.md").write_text(devlog or ("# toy devlog\n\n## Current best\n<!-- kforge:best:start -->\n"
                                         "| v1 | 100 us |\n<!-- kforge:best:end -->\n\n## Versions\n"), encoding="utf-8")
    write_toy_best(root, "v1")
    return root


def write_toy_best(root: Path, version: str) -> Path:
    """A best record (``docs/kernels/toy/best.json``) in which ``version`` is the best, computed by the rule."""
    from pytest_kforge.best import best_path, compute
    from pytest_kforge.results import TrialResult

    rows = [TrialResult(version=version, trial=t, id=t, language="torch", correct=True, median_us=100.0)
            for t in DEFAULT_TRIALS]
    path = best_path(root, "toy")
    compute("toy", rows, list(DEFAULT_TRIALS), command="fake").write(path)
    return path


def fake_gpu_cli(monkeypatch: Any, times: dict[str, dict[str, float]]) -> FakeSuiteRunner:
    """Make ``python -m pytest_kforge.orchestrate``'s ``main`` see a GPU and run its suites on one
    :class:`FakeSuiteRunner` (returned, so a test can read its calls); no ANTHROPIC_API_KEY."""
    import pytest_kforge.orchestrate.loop as loop
    import pytest_kforge.orchestrate.suite as suite

    runner = FakeSuiteRunner(times)
    monkeypatch.setattr(loop, "gpu_available", lambda: True)
    monkeypatch.setattr(suite, "PytestSuiteRunner", lambda _root, **_kw: runner)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return runner


def toy_with_results(path: Path, times: dict[str, dict[str, float]]) -> Path:
    """A toy project whose reports hold a results JSON of v1 (the run's starting point)."""
    root = make_toy_project(path)
    FakeSuiteRunner(times).run_suite("toy", ["v1"], out_json=root / "reports" / "toy" / "results.json", timeout_s=1)
    return root
