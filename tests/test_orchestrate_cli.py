"""``python -m pytest_kforge.orchestrate`` on a CPU machine: the dry-run plan and the no-GPU line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_kforge.orchestrate.loop as loop
from pytest_kforge.orchestrate.__main__ import main
from kforge_fakes import FakeSuiteRunner, make_toy_project, write_toy_best

REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = make_toy_project(tmp_path)
    FakeSuiteRunner({"v1": {"decode": 100.0, "spec": 900.0}}).run_suite(
        "toy", ["v1"], out_json=r / "reports" / "toy" / "results.json", timeout_s=1)
    return r


def test_the_start_version_is_the_best_record_not_the_devlog_table(root: Path, capsys, monkeypatch) -> None:
    """Issue 38: the devlog table's first row named v57_cute while the docs named v59_cute; one source now."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    write_toy_best(root, "v0")  # the devlog's block still names v1 first, and v1 is the latest
    assert main(["--kernel", "toy", "--dry-run", "--root", str(root)]) == 0
    assert "start from: v0 (torch)" in capsys.readouterr().out


def test_dry_run_prints_the_plan_without_running_kernels(root: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    rc = main(["--kernel", "toy", "--dry-run", "--root", str(root), "--goal", "decode<=55us"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "PLAN for toy (dry run: nothing was run on a GPU)" in out
    assert "start from: v1 (cutile-dsl)" in out  # the best record names v1
    assert "offline designer would write v2: NUM_SPLITS: 4 -> 8 (manual promising tile" in out
    assert "--kernel-version v1,v2" in out and "goals: decode<=55us" in out
    assert not (root / "kernels" / "toy" / "v2.py").exists()
    state = json.loads(next((root / "runs").glob("*/state.json")).read_text())
    assert state["status"] == "dry-run"
    assert sorted(state["steps"]) == ["1:ANALYZE", "1:PROFILE", "1:SELECT", "1:STRATEGIZE"]
    devlog = (root / "docs" / "kernels" / "toy.md").read_text()
    assert "kforge:perf" not in devlog  # a dry run writes nothing to the devlog


def test_no_gpu_is_one_line_and_non_zero(root: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(loop, "gpu_available", lambda: False)
    rc = main(["--kernel", "toy", "--root", str(root)])
    err = capsys.readouterr().err
    assert rc != 0
    assert err.count("\n") == 1 and "no CUDA GPU here" in err and "--dry-run" in err
    assert not (root / "runs").exists()


@pytest.mark.parametrize("args, message", [
    (["--resume", "nope"], "no run 'nope'"),
    (["--kernel", "nokernel", "--dry-run"], "unknown kernel 'nokernel'"),
    (["--kernel", "toy", "--dry-run", "--goal", "fast please"], "goal 'fast please' is not understood"),
    (["--kernel", "toy", "--dry-run", "--from", "v7"], "'v7' is not a version of toy"),
])
def test_bad_input_is_one_clear_line(root: Path, capsys, args: list[str], message: str) -> None:
    rc = main([*args, "--root", str(root)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.startswith("kforge orchestrate: error:")


def test_module_entry_point_runs() -> None:
    p = subprocess.run([sys.executable, "-m", "pytest_kforge.orchestrate", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "--dry-run" in p.stdout and "--autotune-budget" in p.stdout


def test_offline_run_killed_in_verify_then_resumed_from_the_cli(root: Path, capsys, monkeypatch) -> None:
    """The H200 acceptance scenario with a fake suite: kill during VERIFY, --resume finishes the run."""
    import pytest_kforge.orchestrate.suite as suite
    from kforge_fakes import SimulatedKill

    times = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 90.0, "spec": 880.0},
             "v3": {"decode": 90.5, "spec": 879.0}}
    runners = iter([FakeSuiteRunner(times, kill_on=1), FakeSuiteRunner(times)])
    monkeypatch.setattr(loop, "gpu_available", lambda: True)
    monkeypatch.setattr(suite, "PytestSuiteRunner", lambda _root, **_kw: next(runners))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SimulatedKill):
        main(["--kernel", "toy", "--root", str(root), "--iterations", "2"])
    run_id = next((root / "runs").glob("*/state.json")).parent.name
    capsys.readouterr()
    assert main(["--resume", run_id, "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"resuming run {run_id}" in out and "[1:DESIGN] done earlier" in out
    assert "| v2 | cutile-dsl | 90.0 | 880.0 |" in out and "| kept |" in out
    assert "| v3 | cutile-dsl | 90.5 | 879.0 |" in out and "no gain beyond the run-to-run spread" in out
    state = json.loads((root / "runs" / run_id / "state.json").read_text())
    assert state["status"] == "done" and len(state["steps"]) == 16
    assert (root / "runs" / run_id / "summary.md").exists()
