"""``--agents replay --replay-from <run>`` on committed recorded runs: each replays on CPU and reproduces its
versions, summaries and keep/discard decisions.  The toy run (tests/data/runs/toy-handoff, made by
make_toy_run.py) always; every orchestrator run committed under docs/kernels/runs/ with its exchanges too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pytest_kforge.orchestrate.loop as loop
from pytest_kforge.orchestrate.__main__ import EXIT_REPLAY_DIFFERS, main
from kforge_fakes import make_toy_project
from pytest_kforge.orchestrate.replayrun import load_source, replayed_iterations
from pytest_kforge.orchestrate.state import read_json

REPO = Path(__file__).resolve().parents[1]
TOY_RUN = REPO / "tests" / "data" / "runs" / "toy-handoff"
COMMITTED = sorted(p.parent for p in (REPO / "docs" / "kernels" / "runs").glob("*/state.json*")
                   if (p.parent / "exchanges").is_dir())

pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "gpu_available", lambda: False)  # a replay must not need one


def test_committed_toy_run_replays_on_cpu(tmp_path: Path, capsys) -> None:
    root = make_toy_project(tmp_path / "proj")
    src = load_source(str(TOY_RUN), tmp_path)
    assert src.options["agents"] == "handoff" and replayed_iterations(src) == 2
    assert all(r.status == "done" for r in src.steps.values()) and len(src.steps) == 16
    rc = main(["--agents", "replay", "--replay-from", str(TOY_RUN), "--root", str(root),
               "--replay-root", str(tmp_path / "scratch")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "matches the recording: v2 kept, v3 discarded" in out
    assert not (root / "runs").exists() and not (root / "kernels" / "toy" / "v2.py").exists()  # checkout untouched
    replayed = next((tmp_path / "scratch" / "runs").glob("*/state.json")).parent
    assert json.loads((replayed / "state.json").read_text())["status"] == "done"
    assert read_json(TOY_RUN / "exchanges" / "1-DESIGN-designer.json")["files"]["kernels/toy/v2.py"] == \
        (tmp_path / "scratch" / "kernels" / "toy" / "v2.py").read_text()


def test_replay_into_a_project_lacking_the_parent_is_a_clear_error(tmp_path: Path, capsys) -> None:
    root = make_toy_project(tmp_path / "proj")
    (root / "kernels" / "toy" / "v1.py").unlink()
    rc = main(["--agents", "replay", "--replay-from", str(TOY_RUN), "--root", str(root),
               "--replay-root", str(tmp_path / "scratch")])
    assert rc != 0 and rc != EXIT_REPLAY_DIFFERS
    assert "the recorded run starts from toy v1, which" in capsys.readouterr().err


@pytest.mark.skipif(not COMMITTED, reason="no orchestrator run with exchanges is committed under docs/kernels/runs")
@pytest.mark.parametrize("run", COMMITTED, ids=[p.name for p in COMMITTED])
def test_committed_kernel_run_replays_on_cpu(run: Path, tmp_path: Path, capsys) -> None:
    rc = main(["--agents", "replay", "--replay-from", str(run), "--root", str(REPO),
               "--replay-root", str(tmp_path / "scratch")])
    out = capsys.readouterr().out
    assert rc == 0 and "matches the recording" in out, out[-3000:]
