"""The orchestrator's loop end to end on CPU: replay agents, a fake suite runner, a toy kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_kforge import contracts as C
from pytest_kforge.fsutil import LockTimeout, file_lock
from pytest_kforge.orchestrate.agents.replay import ReplayDesigner, ReplayProfiler
from pytest_kforge.orchestrate.fakes import FakeSuiteRunner, SimulatedKill, make_toy_project
from pytest_kforge.orchestrate.loop import Options, Orchestrator, StepFailed
from pytest_kforge.orchestrate.state import RunState
from pytest_kforge.orchestrate.summary import summary_rows, write_summary

DATA = Path(__file__).parent / "data" / "transcripts"
DECODE = {"b": 32, "s": 1, "t": 4096, "h": 128}
SPEC = {"b": 32, "s": 16, "t": 4096, "h": 128}
TIMES = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 850.0},
         "v3": {"decode": 85.0, "spec": 1000.0}}


@pytest.fixture(autouse=True)
def _isolate_kernel_modules():
    """The registry imports kernel folders as ``kforge_kernels``; give other tests theirs back."""
    saved = {k: v for k, v in sys.modules.items() if k == "kforge_kernels" or k.startswith("kforge_kernels.")}
    yield
    for k in [k for k in sys.modules if k == "kforge_kernels" or k.startswith("kforge_kernels.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def contract(version: str, params: dict[str, int], us: float, occ: float = 24.0) -> dict[str, list[str]]:
    text = C.ProfileContract(
        "toy", version, params, [C.StageRow("main", us, 30.0, 78.0, occ, "Memory", "low occupancy")], "Memory",
        "KV streaming at 78% of DRAM peak. Too few CTAs to hide latency.",
        [C.Opportunity("split-kv", 25.0, f"achieved_occupancy_pct={occ:g}")]).render()
    return {"replies": [text]}


def profiler_script(*versions: str) -> list[dict[str, list[str]]]:
    out = []
    for v in versions:
        out += [contract(v, DECODE, TIMES[v]["decode"]), contract(v, SPEC, TIMES[v]["spec"])]
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_toy_project(tmp_path)
    FakeSuiteRunner(TIMES).run_suite("toy", ["v1"], out_json=root / "reports" / "toy" / "results.json",
                                     timeout_s=1)
    return root


def orchestrator(root: Path, runner: FakeSuiteRunner, profiler, designer, **kw) -> Orchestrator:
    lines: list[str] = []
    o = Orchestrator(Options(kernel="toy", root=root, agents="replay", **kw), profiler=profiler, designer=designer,
                     runner=runner, has_gpu=True, out=lines.append)
    o.lines = lines  # type: ignore[attr-defined]
    return o


def test_two_iterations_keep_then_discard(project: Path) -> None:
    runner = FakeSuiteRunner(TIMES)
    designer = ReplayDesigner([DATA / "designer_toy_v2.json", DATA / "designer_toy_v3.json"])
    orch = orchestrator(project, runner, ReplayProfiler(profiler_script("v1", "v2", "v3")), designer, iterations=2)
    state = orch.run()

    assert state.status == "done"
    assert runner.calls == [["v1", "v2"], ["v2", "v3"]]  # each VERIFY measures parent and child together
    rows = summary_rows(state)
    assert [(r["version"], r["kept"]) for r in rows] == [("v1", None), ("v2", True), ("v3", False)]
    assert rows[1]["why"].startswith("kept: faster beyond the spread on decode, spec")
    assert "significantly slower on decode, spec" in rows[2]["why"] and "-17.6%" in rows[2]["why"]
    assert state.steps["2:ANALYZE"].outputs["current"] == "v2"  # the kept version is the next parent
    assert (project / "kernels" / "toy" / "v3.py").exists()  # replayed write_file re-created the file
    devlog = (project / "docs" / "kernels" / "toy.md").read_text()
    assert devlog.index("### v2 (cutile-dsl, from v1)") < devlog.index("### v3 (cutile-dsl, from v2)")
    assert "Command: `fake-suite toy v2,v3`" in devlog and "<!-- kforge:perf:start -->" in devlog
    saved = json.loads((state.dir / "state.json").read_text())
    assert all(s["status"] == "done" for s in saved["steps"].values()) and len(saved["steps"]) == 16
    assert (state.dir / "exchanges" / "1-DESIGN-designer.json").exists()
    table, note = write_summary(state)
    assert "| v3 | cutile-dsl | 85.0 | 1000.0 |" in table and "discarded" in table
    assert note.startswith(("plot written", "plot skipped"))


def test_replay_of_a_recorded_run_is_exact(project: Path, tmp_path: Path) -> None:
    runner = FakeSuiteRunner(TIMES)
    designer = ReplayDesigner([DATA / "designer_toy_v2.json"])
    first = orchestrator(project, runner, ReplayProfiler(profiler_script("v1", "v2")), designer, iterations=1).run()
    (project / "kernels" / "toy" / "v2.py").unlink()
    again = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler(first.dir / "exchanges"),
                         ReplayDesigner(first.dir / "exchanges"), iterations=1).run()
    assert (project / "kernels" / "toy" / "v2.py").exists()
    assert again.steps["1:DESIGN"].outputs["summary"] == first.steps["1:DESIGN"].outputs["summary"]
    assert again.steps["1:EVALUATE"].outputs["decision"] == first.steps["1:EVALUATE"].outputs["decision"]


def test_contract_error_gets_one_retry(project: Path) -> None:
    profiler = ReplayProfiler([DATA / "profiler_bad_then_good.json", contract("v1", SPEC, 900.0)])
    orch = orchestrator(project, FakeSuiteRunner(TIMES), profiler, ReplayDesigner([]), iterations=1, dry_run=False)
    with pytest.raises(StepFailed):  # DESIGN has no transcript: the run stops there, PROFILE is done
        orch.run()
    st = RunState.load(project / "runs", orch.state.run_id)
    assert st.steps["1:PROFILE"].status == "done"
    ex = json.loads((st.dir / "exchanges" / "1-PROFILE-profiler-decode.json").read_text())
    assert len(ex["replies"]) == 2  # the broken reply, then the corrected one


def test_contract_broken_twice_fails_the_step_and_keeps_the_run(project: Path) -> None:
    orch = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler([DATA / "profiler_bad_twice.json"]),
                        ReplayDesigner([]), iterations=1)
    with pytest.raises(StepFailed, match="broke the profile contract twice"):
        orch.run()
    run_id = orch.state.run_id
    st = RunState.load(project / "runs", run_id)
    assert st.steps["1:ANALYZE"].status == "done" and st.steps["1:PROFILE"].status == "failed"
    assert "contract twice" in st.steps["1:PROFILE"].error
    # the run is not lost: resume with a working profiler finishes it
    orch2 = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler(profiler_script("v1", "v2")),
                         ReplayDesigner([DATA / "designer_toy_v2.json"]), iterations=1)
    st2 = orch2.run(resume=run_id)
    assert st2.status == "done" and st2.steps["1:EVALUATE"].outputs["decision"]["kept"] is True
    assert any("done earlier" in ln and "1:ANALYZE" in ln for ln in orch2.lines)  # type: ignore[attr-defined]


def test_resume_after_kill_in_verify_redoes_verify_only(project: Path) -> None:
    designer = ReplayDesigner([DATA / "designer_toy_v2.json"])
    orch = orchestrator(project, FakeSuiteRunner(TIMES, kill_on=1), ReplayProfiler(profiler_script("v1")), designer,
                        iterations=1)
    with pytest.raises(SimulatedKill):
        orch.run()
    st = RunState.load(project / "runs", orch.state.run_id)
    assert st.steps["1:DESIGN"].status == "done" and st.steps["1:VERIFY"].status == "running"
    assert "1:EVALUATE" not in st.steps

    runner = FakeSuiteRunner(TIMES)
    fresh_designer = ReplayDesigner([])  # would fail if DESIGN were redone
    orch2 = orchestrator(project, runner, ReplayProfiler(profiler_script("v2")), fresh_designer, iterations=1)
    st2 = orch2.run(resume=st.run_id)
    assert st2.status == "done" and fresh_designer.played == []
    assert runner.calls == [["v1", "v2"]]
    assert st2.steps["1:EVALUATE"].outputs["decision"]["kept"] is True


def test_lock_keeps_two_runs_on_one_kernel_apart(project: Path) -> None:
    orch = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler([]), ReplayDesigner([]), lock_timeout_s=0.2)
    with file_lock(project / "runs" / "toy.orchestrate"):
        with pytest.raises(LockTimeout, match="locked by another kforge process"):
            orch.run()
    assert not list((project / "runs").glob("*/state.json"))  # nothing was started under the held lock


def test_goal_met_stops_the_loop(project: Path) -> None:
    orch = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler(profiler_script("v1", "v2")),
                        ReplayDesigner([DATA / "designer_toy_v2.json"]), iterations=3, goals=["decode<=85us"])
    st = orch.run()
    assert "2:ANALYZE" not in st.steps
    assert st.steps["1:EVALUATE"].outputs["goal_met"] is True
    assert any("goal met" in ln for ln in orch.lines)  # type: ignore[attr-defined]


def test_oom_note_is_surfaced(project: Path) -> None:
    runner = FakeSuiteRunner(TIMES, notes={"v2:spec": "b halved from 32 to 16: out of GPU memory"})
    orch = orchestrator(project, runner, ReplayProfiler(profiler_script("v1", "v2")),
                        ReplayDesigner([DATA / "designer_toy_v2.json"]), iterations=1)
    st = orch.run()
    assert "b halved from 32 to 16" in st.steps["1:VERIFY"].outputs["line"]
    assert "b halved from 32 to 16" in (project / "docs" / "kernels" / "toy.md").read_text()


def test_incorrect_version_is_discarded_with_the_failure(project: Path) -> None:
    orch = orchestrator(project, FakeSuiteRunner(TIMES, incorrect=("v2",)), ReplayProfiler(profiler_script("v1")),
                        ReplayDesigner([DATA / "designer_toy_v2.json"]), iterations=1)
    st = orch.run()
    d = st.steps["1:EVALUATE"].outputs["decision"]
    assert d["kept"] is False and "not correct" in d["reason"] and "max_abs" in d["reason"]
    assert st.steps["1:EVALUATE"].outputs["current"] == "v1"
