"""The handoff backend on CPU: the run stops at DESIGN waiting, --resume continues once the version file and
its NewVersionSummary exist (and says what is missing when not), the run folder moves between machines, and
--agents replay re-runs the finished run from its recording."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import pytest_kforge.orchestrate.loop as loop
from pytest_kforge import contracts as C
from pytest_kforge.orchestrate.__main__ import EXIT_REPLAY_DIFFERS, EXIT_STILL_WAITING, main
from kforge_fakes import TOY_V1, FakeSuiteRunner, fake_gpu_cli, toy_with_results

TIMES = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 850.0},
         "v3": {"decode": 85.0, "spec": 1000.0}}

pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> FakeSuiteRunner:
    return fake_gpu_cli(monkeypatch, TIMES)


def project(path: Path) -> Path:
    return toy_with_results(path, TIMES)


def act_as_designer(root: Path, run: Path, i: int, *, summary: str | None = None) -> C.OptimizationTask:
    """What the person (or Claude Code session) does: read the task, write the version and the summary."""
    tdir = run / "tasks" / f"{i}-DESIGN-designer"
    task = C.OptimizationTask.parse((tdir / "task.md").read_text())
    splits = 4 * 2 ** i
    (root / "kernels" / "toy" / f"{task.new_version}.py").write_text(
        TOY_V1.replace('PARENT = "v0"', f"PARENT = {task.current!r}").replace('"NUM_SPLITS": 4', f'"NUM_SPLITS": {splits}'))
    text = summary if summary is not None else (tdir / "summary.template.md").read_text().replace(
        "<optimisation name as written in the task>: <what you changed>; <next change>",
        f"{task.optimizations[0].name}: NUM_SPLITS -> {splits}").replace("<why this point matters>", "default")
    (tdir / "reply.md").write_text(text)
    return task


def run_dir(root: Path) -> Path:
    return next((root / "runs").glob("*/state.json")).parent


def steps(run: Path) -> dict[str, str]:
    return {k: v["status"] for k, v in json.loads((run / "state.json").read_text())["steps"].items()}


def test_handoff_waits_resumes_and_replays(tmp_path: Path, runner: FakeSuiteRunner, capsys, monkeypatch) -> None:
    root = project(tmp_path / "proj")
    assert main(["--kernel", "toy", "--agents", "handoff", "--iterations", "2", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    run = run_dir(root)
    rid = run.name
    assert "DESIGN is handed off: toy v1 -> v2" in out and "kernels/toy/v2.py" in out
    assert f"runs/{rid}/tasks/1-DESIGN-designer/reply.md" in out and f"--resume {rid}" in out
    assert steps(run)["1:DESIGN"] == "waiting" and "1:VERIFY" not in steps(run)
    assert json.loads((run / "state.json").read_text())["status"] == "waiting"
    assert runner.calls == []

    # resume with nothing written: one sentence on what is missing, the step still waiting
    assert main(["--resume", rid, "--root", str(root)]) == EXIT_STILL_WAITING
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "the version file kernels/toy/v2.py does not exist and the summary" in line and "then --resume" in line

    # a summary that breaks the contract: still waiting, with the parse error
    act_as_designer(root, run, 1, summary="## New Version: toy v2\nit is faster\n")
    assert main(["--resume", rid, "--root", str(root)]) == EXIT_STILL_WAITING
    assert "breaks the NewVersionSummary contract" in capsys.readouterr().out

    # the real reply: VERIFY..LEARN run, then iteration 2 waits at its DESIGN (exit 0: progress was made)
    act_as_designer(root, run, 1)
    assert main(["--resume", rid, "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "[1:ANALYZE] done earlier" in out and "DESIGN is handed off: toy v2 -> v3" in out
    st = steps(run)
    assert all(st[f"1:{s}"] == "done" for s in ("DESIGN", "VERIFY", "EVALUATE", "LEARN"))
    assert st["2:DESIGN"] == "waiting" and runner.calls == [["v1", "v2"]]
    assert "### v2 (cutile-dsl, from v1)" in (root / "docs" / "kernels" / "toy.md").read_text()  # LEARN's entry

    # the folder moves to another machine (another root): resume there, nothing done is redone
    root2 = tmp_path / "elsewhere"
    shutil.copytree(root, root2)
    act_as_designer(root2, root2 / "runs" / rid, 2)
    assert main(["--resume", rid, "--root", str(root2)]) == 0
    out = capsys.readouterr().out
    assert "[1:VERIFY] done earlier" in out and runner.calls == [["v1", "v2"], ["v2", "v3"]]
    run2 = root2 / "runs" / rid
    assert all(s == "done" for s in steps(run2).values()) and len(steps(run2)) == 16
    assert "| v3 | cutile-dsl | 85.0 | 1000.0 |" in out
    assert (run2 / "outside" / "docs" / "kernels" / "toy.md").exists()  # LEARN's writes travel with the folder
    log = json.loads((run2 / "outside.json").read_text())
    carried = sorted(p.relative_to(run2 / "outside").as_posix() for p in (run2 / "outside").rglob("*") if p.is_file())
    assert len(log) >= 2 and carried == sorted(log[-1]["written"])  # only the last invocation's writes
    walls = [v["wall_s"] for v in json.loads((run2 / "state.json").read_text())["steps"].values()]
    assert len(walls) == 16 and all(isinstance(w, float) for w in walls)
    summary = (run2 / "summary.md").read_text()
    assert "Step wall times (s):" in summary and "| 2 | " in summary and "(waiting)" not in summary

    # replay (no GPU asked for, no suite run): the same versions, summaries and decisions
    calls = len(runner.calls)
    monkeypatch.setattr(loop, "gpu_available", lambda: False)
    assert main(["--agents", "replay", "--replay-from", str(run2), "--root", str(root),
                 "--replay-root", str(tmp_path / "scratch")]) == 0
    assert len(runner.calls) == calls
    out = capsys.readouterr().out
    assert "matches the recording: v2 kept, v3 discarded" in out
    assert (tmp_path / "scratch" / "kernels" / "toy" / "v3.py").exists()  # written back from the recording

    # a recording whose suite result was tampered with does not reproduce
    data = json.loads((run2 / "verify-2.json").read_text())
    for r in data["results"]:
        if r["version"] == "v3":
            r["median_us"] = 50.0
    (run2 / "verify-2.json").write_text(json.dumps(data))
    assert main(["--agents", "replay", "--replay-from", str(run2), "--root", str(root),
                 "--replay-root", str(tmp_path / "scratch2")]) == EXIT_REPLAY_DIFFERS
    assert "replay differs: 2:EVALUATE decision" in capsys.readouterr().out


def test_a_handoff_starts_on_a_cpu_and_resumes_on_a_gpu(tmp_path: Path, monkeypatch, capsys) -> None:
    """Design on a laptop: the first half (ANALYZE..STRATEGIZE from the reports already written, then the handed-off
    DESIGN) needs no GPU; the --resume that runs VERIFY is refused until one is there."""
    import pytest_kforge.orchestrate.suite as suite

    root = project(tmp_path / "proj")
    runner = FakeSuiteRunner(TIMES)
    monkeypatch.setattr(loop, "gpu_available", lambda: False)
    monkeypatch.setattr(suite, "PytestSuiteRunner", lambda _root, **_kw: runner)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["--kernel", "toy", "--agents", "handoff", "--iterations", "1", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "no CUDA GPU here: PROFILE reads the reports already written" in out and "must run on a GPU" in out
    run = run_dir(root)
    assert steps(run)["1:DESIGN"] == "waiting" and runner.calls == []
    act_as_designer(root, run, 1)
    assert main(["--resume", run.name, "--root", str(root)]) == 2  # VERIFY needs the GPU
    err = capsys.readouterr().err
    assert "no CUDA GPU here" in err and "--resume it on a GPU" in err
    assert steps(run)["1:DESIGN"] == "waiting"

    monkeypatch.setattr(loop, "gpu_available", lambda: True)  # the GPU machine, the same run folder
    assert main(["--resume", run.name, "--root", str(root)]) == 0
    assert steps(run)["1:VERIFY"] == "done" and runner.calls


def test_a_handed_off_steps_wall_time_runs_from_the_hand_off_to_the_accepted_reply(
        tmp_path: Path, runner: FakeSuiteRunner, capsys) -> None:
    """stop 44: the DESIGN wall time read ~0 s (only the resume's reading of the reply); it is the designer's time."""
    import datetime as dt

    root = project(tmp_path / "proj")
    assert main(["--kernel", "toy", "--agents", "handoff", "--iterations", "1", "--root", str(root)]) == 0
    run = run_dir(root)
    state = json.loads((run / "state.json").read_text())
    an_hour_ago = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).isoformat(timespec="seconds")
    state["steps"]["1:DESIGN"]["started"] = an_hour_ago
    (run / "state.json").write_text(json.dumps(state))
    assert main(["--resume", run.name, "--root", str(root)]) == EXIT_STILL_WAITING  # nothing written yet
    assert json.loads((run / "state.json").read_text())["steps"]["1:DESIGN"]["started"] == an_hour_ago
    act_as_designer(root, run, 1)
    assert main(["--resume", run.name, "--root", str(root)]) == 0
    design = json.loads((run / "state.json").read_text())["steps"]["1:DESIGN"]
    assert design["status"] == "done" and design["started"] == an_hour_ago and 3590 < design["wall_s"] < 3700
    capsys.readouterr()
