"""Regenerate the recorded toy run the replay test plays back (``tests/data/runs/toy-handoff/``).

    python tests/data/runs/make_toy_run.py

A two-iteration ``--agents handoff`` run of the toy kernel with the fake suite runner (v2 kept, v3
discarded), the designer's part played by this script, packed with ``--pack``.  CPU only.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[3]),  # this checkout's pytest_kforge, not an installed one
                str(Path(__file__).resolve().parents[2])]  # tests/: kforge_fakes

import pytest_kforge.orchestrate.loop as loop  # noqa: E402
import pytest_kforge.orchestrate.suite as suite  # noqa: E402
from pytest_kforge import contracts as C  # noqa: E402
from pytest_kforge.orchestrate.__main__ import main  # noqa: E402
from kforge_fakes import TOY_V1, FakeSuiteRunner, make_toy_project  # noqa: E402

TIMES = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 850.0},
         "v3": {"decode": 85.0, "spec": 1000.0}}
DEST = Path(__file__).parent / "toy-handoff"


def design(root: Path, run: Path, i: int) -> None:
    tdir = run / "tasks" / f"{i}-DESIGN-designer"
    task = C.OptimizationTask.parse((tdir / "task.md").read_text())
    splits = 4 * 2 ** i
    (root / "kernels" / "toy" / f"{task.new_version}.py").write_text(
        TOY_V1.replace('PARENT = "v0"', f"PARENT = {task.current!r}").replace('"NUM_SPLITS": 4', f'"NUM_SPLITS": {splits}'))
    (tdir / "reply.md").write_text(C.NewVersionSummary(
        "toy", task.new_version, [f"{task.optimizations[0].name}: NUM_SPLITS -> {splits}"],
        [f"kernels/toy/{task.new_version}.py"], [], "PASS",
        [C.TrialCheck(32, 1, 4096, "decode default"), C.TrialCheck(32, 16, 4096, "spec default")],
        "docs/kernels/toy.md").render())


def record() -> int:
    runner = FakeSuiteRunner(TIMES)
    loop.gpu_available = lambda: True  # type: ignore[assignment]
    suite.PytestSuiteRunner = lambda _root, **_kw: runner  # type: ignore[assignment,misc]
    with tempfile.TemporaryDirectory() as tmp:
        root = make_toy_project(Path(tmp))
        FakeSuiteRunner(TIMES).run_suite("toy", ["v1"], out_json=root / "reports" / "toy" / "results.json",
                                         timeout_s=1)
        assert main(["--kernel", "toy", "--agents", "handoff", "--iterations", "2", "--root", str(root)]) == 0
        run = next((root / "runs").glob("*/state.json")).parent
        for i in (1, 2):
            design(root, run, i)
            assert main(["--resume", run.name, "--root", str(root)]) == 0
        shutil.rmtree(DEST, ignore_errors=True)
        return main(["--pack", str(run), "--pack-to", str(DEST), "--root", str(root)])


if __name__ == "__main__":
    sys.exit(record())
