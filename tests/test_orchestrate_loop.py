"""The orchestrator's loop end to end on CPU: replay agents, a fake suite runner, a toy kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_kforge import contracts as C
from pytest_kforge.fsutil import LockTimeout, file_lock
from pytest_kforge.registry import load_kernel
from pytest_kforge.orchestrate.agents.replay import ReplayDesigner, ReplayProfiler
from kforge_fakes import FakeSuiteRunner, SimulatedKill, make_toy_project
from pytest_kforge.orchestrate.loop import Options, Orchestrator, StepFailed
from pytest_kforge.orchestrate.state import RunState
from pytest_kforge.orchestrate.summary import summary_rows, write_summary

DATA = Path(__file__).parent / "data" / "transcripts"
DECODE = {"b": 32, "s": 1, "t": 4096, "h": 128}
SPEC = {"b": 32, "s": 16, "t": 4096, "h": 128}
TIMES = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 850.0},
         "v3": {"decode": 85.0, "spec": 1000.0}}


pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


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


def test_tuning_budget_spent_stops_with_the_reason(project: Path) -> None:
    """After a discarded child whose VERIFY used up the tuning budget, the next iteration stops."""
    orch = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler(profiler_script("v1", "v2")),
                        ReplayDesigner([DATA / "designer_toy_v2.json"]), iterations=3, autotune_budget_s=0.5)
    TIMES_V2_SLOW = {**TIMES, "v2": {"decode": 120.0, "spec": 950.0}}
    orch.runner = FakeSuiteRunner(TIMES_V2_SLOW)
    st = orch.run()
    assert st.steps["1:EVALUATE"].outputs["decision"]["kept"] is False
    assert st.steps["2:STRATEGIZE"].outputs["tuning"] == "stop" and "budget" in st.steps["2:STRATEGIZE"].outputs["stop"]
    assert st.steps["2:DESIGN"].outputs["skipped"] and "3:ANALYZE" not in st.steps
    assert [r["version"] for r in summary_rows(st)] == ["v1", "v2"]


def test_a_contract_about_another_version_gets_the_retry(project: Path) -> None:
    from pytest_kforge.orchestrate.agents.base import AgentContext, AgentContractError

    wrong, right = contract("v9", DECODE, 1.0)["replies"][0], contract("v1", DECODE, 100.0)["replies"][0]
    ctx = AgentContext(root=project, kernels_dir=project / "kernels", kernel="toy", step_key="1:PROFILE")
    got = ReplayProfiler([{"replies": [wrong, right]}]).profile("toy", "v1", "decode", DECODE, context=ctx)
    assert got.version == "v1" and len(ctx.exchange["replies"]) == 2
    with pytest.raises(AgentContractError, match="about toy v9, but toy v1 was asked for"):
        ReplayProfiler([{"replies": [wrong, wrong]}]).profile("toy", "v1", "decode", DECODE, context=ctx)


ROWS = [{"version": "v1", "kept": None, "decode_us": 100.0, "spec_us": 900.0},
        {"version": "v2", "kept": True, "decode_us": 90.0, "spec_us": 880.0},
        {"version": "v3", "kept": False, "decode_us": 95.0, "spec_us": None}]


def test_plot_is_skipped_with_a_note_without_matplotlib(tmp_path: Path, monkeypatch) -> None:
    from pytest_kforge.orchestrate.summary import plot_trajectory

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert plot_trajectory(ROWS, tmp_path / "t.png") == "plot skipped: matplotlib is not installed (pip install matplotlib)"
    assert not (tmp_path / "t.png").exists()


def test_plot_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is optional (the dev extra installs it)")
    from pytest_kforge.orchestrate.summary import plot_trajectory

    assert plot_trajectory(ROWS, tmp_path / "t.png").startswith("plot written")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_applied_features_come_from_the_imported_module(project: Path) -> None:
    """A FEATURES tuple built from a shared one is only visible once imported; an unimportable version falls back
    to reading its file."""
    k = project / "kernels" / "toy"
    (k / "_shared.py").write_text('BASE = ("split-kv", "online-softmax")\n', encoding="utf-8")
    v1 = (k / "v1.py").read_text(encoding="utf-8")
    (k / "v1.py").write_text("from kforge_kernels.toy._shared import BASE\n" + v1.replace(
        'CONFIG = ', 'FEATURES = BASE + ("tma-store-epilogue",)\nCONFIG = ', 1), encoding="utf-8")
    (k / "v2.py").write_text('import no_such_module_anywhere\nLANGUAGE = "cutile-dsl"\nPARENT = "v1"\n'
                             'FEATURES = ("persistent-tile-scheduler",)\n', encoding="utf-8")
    o = orchestrator(project, FakeSuiteRunner(TIMES), ReplayProfiler([]), ReplayDesigner([]))
    assert set(o._applied("v1")) == {"split-kv", "online-softmax", "tma-store-epilogue"}
    assert set(o._applied("v2")) == {"persistent-tile-scheduler"}


def test_summary_table_has_the_kernels_own_trials() -> None:
    """rmsnorm_fp8's run 02 loop printed MLA's decode/spec columns ("spec us: -"): the table takes the rows' trials."""
    from pytest_kforge.orchestrate.summary import render_table, trials_of

    rows = [{"version": "v2_cute", "dsl": "cute-dsl", "kept": None, "why": "start", "prefill_us": 123.2,
             "prefill_pct_floor": 94.3, "decode_us": 6.1, "decode_pct_floor": 14.9},
            {"version": "v3_cute", "dsl": "cute-dsl", "kept": True, "why": "kept", "verify_s": 33.0,
             "prefill_us": 123.7, "decode_us": 5.8, "prefill_pct_floor": 93.9, "decode_pct_floor": 15.8}]
    assert trials_of(rows) == ["prefill", "decode"] and trials_of([]) == ["decode", "spec"]
    table = render_table(rows)
    assert "| prefill us | decode us | prefill % floor | decode % floor |" in table and "spec" not in table
    assert "| v3_cute | cute-dsl | 123.7 | 5.8 | 93.9 | 15.8 | kept |" in table


def test_a_table_with_no_measured_row_takes_the_kernels_default_trials(tmp_path: Path) -> None:
    """An rmsnorm_fp8 loop whose suite failed printed MLA's `decode us | spec us` columns: with no row measured, the
    columns are the run's kernel's default trials."""
    from pytest_kforge.orchestrate.state import RunState
    from pytest_kforge.orchestrate.summary import default_trials, render_table

    root = Path(__file__).resolve().parents[1]
    st = RunState.create(tmp_path, "rmsnorm_fp8", {"root": str(root), "kernels_dir": "kernels"})
    trials = default_trials(st)
    spec = load_kernel("rmsnorm_fp8", root / "kernels").spec
    assert trials and "spec" not in trials and set(trials) <= set(spec.trials)
    assert render_table([{"version": "v3_cute", "kept": False, "why": "suite failed"}], trials).startswith(
        "| Version | DSL | " + " | ".join(f"{t} us" for t in trials))
    broken = RunState.create(tmp_path, "no_such_kernel", {"root": str(root)})
    assert default_trials(broken) == ("decode", "spec")


class _Sessions(FakeSuiteRunner):
    """A fake suite whose timings change from one session to the next (``sessions[k]`` for call k)."""

    def __init__(self, sessions: list[dict[str, dict[str, float]]]) -> None:
        super().__init__(sessions[0])
        self.sessions, self.trials_asked = sessions, []  # type: list[tuple[str, ...]]

    def run_suite(self, kernel, versions, *, out_json, timeout_s, trials=("decode", "spec")):  # type: ignore[override]
        self.timings = self.sessions[min(len(self.calls), len(self.sessions) - 1)]
        self.trials_asked.append(tuple(trials))
        return super().run_suite(kernel, versions, out_json=out_json, timeout_s=timeout_s, trials=trials)


@pytest.mark.parametrize("second_spec, kept", [(905.0, True), (915.0, False)])
def test_a_borderline_slowdown_is_measured_again_before_it_discards(project: Path, second_spec: float,
                                                                    kept: bool) -> None:
    """v2 is 20% faster on decode and 1.7% slower on spec against a 1% bar: VERIFY measures spec again, and the
    slowdown discards v2 only when the second session shows it too."""
    first = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 915.0}}
    runner = _Sessions([first, {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": second_spec}}])
    designer = ReplayDesigner([DATA / "designer_toy_v2.json"])
    state = orchestrator(project, runner, ReplayProfiler(profiler_script("v1", "v2")), designer, iterations=1).run()
    assert runner.calls == [["v1", "v2"], ["v1", "v2"]] and runner.trials_asked[1] == ("spec",)
    assert (state.dir / "recheck-1.json").exists()
    assert "spec measured again" in state.steps["1:VERIFY"].outputs["line"]
    d = state.steps["1:EVALUATE"].outputs["decision"]
    assert d["kept"] is kept and d["per_trial"]["spec"]["recheck_verdict"] == ("not confirmed" if kept else "confirmed")
    # a replay serves the recorded re-measurement as the suite wrote it
    from pytest_kforge.orchestrate.replayrun import RecordedSuiteRunner

    served = RecordedSuiteRunner(state).run_suite("toy", ["v1", "v2"], out_json=project / "replay" / "recheck-1.json",
                                                  timeout_s=1, trials=("spec",))
    assert served.ok and served.results == json.loads((state.dir / "recheck-1.json").read_text())
