"""Offline agents: the rule-based profiler and the CONFIG-changing designer, and a full offline run
with a real knowledge base (LEARN) on a toy kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_kforge import contracts as C
from pytest_kforge.knowledge import KnowledgeBase
from pytest_kforge.orchestrate.agents.base import AgentContext, DesignImpossible
from pytest_kforge.orchestrate.agents.offline import OfflineDesigner, OfflineProfiler, propose_config
from kforge_fakes import FakeSuiteRunner, make_toy_project
from pytest_kforge.orchestrate.loop import Options, Orchestrator
from pytest_kforge.registry import Registry

DECODE = {"b": 32, "s": 1, "t": 4096, "h": 128}


pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


def task(current: str, new: str, *names: str) -> C.OptimizationTask:
    return C.OptimizationTask("toy", current, new, "Memory-bound",
                              [C.PlannedOptimization(n, "catalog match") for n in names],
                              C.Constraints("<= 128 regs", ">= 24%", "tile-level", "CONFIG-only"))


def test_propose_config_rules() -> None:
    parent = {"BLOCK_N": 64, "NUM_SPLITS": 4}
    new, changes = propose_config(parent, [{"name": "split-kv"}], [])
    assert new == {"BLOCK_N": 64, "NUM_SPLITS": 8} and changes == ["NUM_SPLITS: 4 -> 8 (split-kv)"]
    # already tried (a sibling or an ancestor has it): the next hand-picked value
    assert propose_config(parent, [{"name": "split-kv"}], [{"BLOCK_N": 64, "NUM_SPLITS": 8}])[0]["NUM_SPLITS"] == 16
    # None means "automatic": the hand-picked list in its order
    assert propose_config({"NUM_SPLITS": None}, [{"name": "split-kv"}], [])[0] == {"NUM_SPLITS": 2}
    # an explicit suggestion from the entry wins
    assert propose_config(parent, [{"name": "x", "config": {"BLOCK_N": 128}}], [])[0] == {"BLOCK_N": 128,
                                                                                          "NUM_SPLITS": 4}
    # CuTe-level optimisations are not CONFIG changes: skipped, manual tiles instead
    new, changes = propose_config(parent, [{"name": "warp specialization"}], [])
    assert "manual promising tile" in changes[0]
    assert propose_config({}, [{"name": "split-kv"}], []) is None
    # a row-per-CTA kernel's thread count is a knob too (rmsnorm_fp8's CuTe versions): the next larger value
    new, changes = propose_config({"threads": 128}, [], [])
    assert new == {"threads": 256} and "threads: 128 -> 256" in changes[0]


def test_offline_designer_writes_an_importable_version(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    ctx = AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy",
                       matches=[{"name": "split-kv", "title": "Split-KV", "config": {}, "languages": []}])
    summary = OfflineDesigner().design(task("v1", "v2", "split-kv"), context=ctx)
    assert isinstance(summary, C.NewVersionSummary) and summary.correctness == "PASS"
    assert summary.files_created == ["kernels/toy/v2.py"]
    v2 = Registry(root / "kernels").kernel("toy").version("v2")
    assert (v2.language, v2.parent) == ("cutile-dsl", "v1")
    assert v2.config == {"BLOCK_N": 64, "NUM_SPLITS": 8}
    seen: list = []
    v2.module.run("x", y=seen)  # the parent's run receives the child's CONFIG
    assert seen == [{"BLOCK_N": 64, "NUM_SPLITS": 8}]
    # a second design from v1 never repeats v2's config
    s3 = OfflineDesigner().design(task("v1", "v3", "split-kv"), context=ctx)
    assert Registry(root / "kernels").kernel("toy").version("v3").config["NUM_SPLITS"] == 16
    assert s3.changes == ["NUM_SPLITS: 4 -> 16 (split-kv)"]


def test_offline_designer_without_knobs_says_why(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    ctx = AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy")
    with pytest.raises(DesignImpossible, match="no untried CONFIG change for toy v0"):
        OfflineDesigner().design(task("v0", "v2", "split-kv"), context=ctx)
    assert not (root / "kernels" / "toy" / "v2.py").exists()


def test_offline_profiler_sources(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    results = FakeSuiteRunner({"v1": {"decode": 92.4, "spec": 900.0}}).run_suite(
        "toy", ["v1"], out_json=tmp_path / "r.json", timeout_s=1).results
    results["results"][0].update(gbps=3010.0, tflops=40.0)
    ctx = AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy", results=results, can_profile=True,
                       runner=FakeSuiteRunner({}))
    c = OfflineProfiler().profile("toy", "v1", "decode", DECODE, context=ctx)
    assert c.bottleneck == "Memory" and c.stages[0].duration_us == 92.4 and c.stages[0].dram_pct == 70.0
    assert "not from ncu counters" in c.root_cause and any("derived" in n for n in ctx.notes)
    assert any("profiling v1 decode failed" in n for n in ctx.notes)  # it tried the profiler first
    # an existing report (the JSON twin) is used as it is
    report = root / "reports" / "toy" / "v1" / "decode.json"
    report.parent.mkdir(parents=True)
    c.stages[0].occ_pct = 11.0
    report.write_text(json.dumps(c.to_dict()))
    again = OfflineProfiler().profile("toy", "v1", "decode", DECODE,
                                      context=AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy"))
    assert again.stages[0].occ_pct == 11.0
    with pytest.raises(DesignImpossible, match="no profile report and no measured results"):
        OfflineProfiler().profile("toy", "v9", "decode", DECODE, context=AgentContext(
            root=root, kernels_dir=root / "kernels", kernel="toy", results=results))


def _report(root: Path, version: str, trial: str, us: float, occ: float) -> None:
    c = C.ProfileContract("toy", version, DECODE, [C.StageRow("main", us, 20.0, 60.0, occ, "Latency", "few CTAs")],
                          "Latency", "Too few CTAs in flight. DRAM is at 60%.", [])
    p = root / "reports" / "toy" / version / f"{trial}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(c.to_dict()))


def _kb_with_split_kv(root: Path) -> KnowledgeBase:
    kb = KnowledgeBase(root / "docs" / "knowledge")
    kb.add_entry("split-kv", kind="optimization", scope="shared", title="Split the KV sequence across CTAs",
                 contexts=["any decode attention kernel with few sequences per SM"],
                 triggers=["achieved_occupancy_pct < 40"], est_gain=25.0, mechanism="More CTAs in flight.",
                 affected_metrics=["achieved_occupancy_pct"], implementation="NUM_SPLITS = 8",
                 generalization="Parallelism beyond b*h.", pitfalls=["combine pass cost"],
                 interactions=["tile size"], applies_to=["any"], languages=["cutile-dsl", "cute-dsl"],
                 evidence=[("external", "1", "2", "-50%")], source="external")
    return kb


@pytest.mark.parametrize("v1_splits, v2_times, kind", [
    (4, {"decode": 80.0, "spec": 850.0}, "optimization"),  # kept
    (4, {"decode": 150.0, "spec": 1500.0}, "optimization"),  # a retune (4 -> 8) never demotes the entry
    (1, {"decode": 150.0, "spec": 1500.0}, "anti-pattern"),  # introduced (1 -> 2), slower where it fired
])
def test_offline_run_learns(tmp_path: Path, v1_splits: int, v2_times: dict, kind: str) -> None:
    root = make_toy_project(tmp_path)
    v1 = root / "kernels" / "toy" / "v1.py"
    v1.write_text(v1.read_text().replace('"NUM_SPLITS": 4', f'"NUM_SPLITS": {v1_splits}'))
    kb = _kb_with_split_kv(root)
    for trial in ("decode", "spec"):
        _report(root, "v1", trial, 100.0, 24.0)
        _report(root, "v2", trial, 80.0, 30.0)
    runner = FakeSuiteRunner({"v1": {"decode": 100.0, "spec": 900.0}, "v2": v2_times})
    lines: list[str] = []
    orch = Orchestrator(Options(kernel="toy", root=root, iterations=1), profiler=OfflineProfiler(),
                        designer=OfflineDesigner(), runner=runner, knowledge=kb, has_gpu=True, out=lines.append)
    st = orch.run()
    kept = v2_times["decode"] < 100.0
    new_splits = 8 if v1_splits == 4 else 2
    assert st.steps["1:STRATEGIZE"].outputs["planned"][0]["entry"] == "split-kv"
    assert st.steps["1:DESIGN"].outputs["summary"]["changes"] == [f"NUM_SPLITS: {v1_splits} -> {new_splits} (split-kv)"]
    assert "## Optimization Task: toy v1 -> v2" in st.steps["1:DESIGN"].outputs["task_md"]
    assert st.steps["1:EVALUATE"].outputs["decision"]["kept"] is kept
    entry = kb.get("split-kv")
    assert len(entry.evidence_rows("local")) == 2  # one row per trial, measured here
    assert entry.kind == kind
    if not kept and kind == "optimization":
        assert entry.triggers == ["achieved_occupancy_pct < 40"]  # nothing helped: not narrowed either
        assert "a retune of a knob the parent already uses (NUM_SPLITS 4 -> 8)" in entry.text
    assert kb.validate() == []
    devlog = (root / "docs" / "kernels" / "toy.md").read_text()
    if kept:  # LEARN redone (as after a kill in the middle of it) writes nothing twice
        orch._usage, orch._cost = {}, 0.0
        orch.step_learn(1, "1:LEARN")
        assert (root / "docs" / "kernels" / "toy.md").read_text() == devlog
        assert len(kb.get("split-kv").evidence_rows("local")) == 2
    assert devlog.count("### v2 (cutile-dsl, from v1)") == 1
    assert "**Prediction:** task estimate: Split the KV sequence across CTAs: 25% gain; measured (gain) decode" in devlog


def test_next_version_name_follows_the_design_languages_line(tmp_path: Path) -> None:
    from pytest_kforge.orchestrate.agents.offline import next_version_name

    for name, lang in (("v0", "torch"), ("v1", "cutile-dsl"), ("v11", "cutile-dsl"), ("v1_cute", "cute-dsl"),
                       ("v60_cute", "cute-dsl")):
        (tmp_path / f"{name}.py").write_text(f"LANGUAGE = {lang!r}\n")
    (tmp_path / "_cute_helper.py").write_text("X = 1\n")
    assert next_version_name(tmp_path, "cute-dsl") == "v61_cute"
    assert next_version_name(tmp_path, "cutile-dsl") == "v12"
    assert next_version_name(tmp_path) == "v61"  # no language: above every version, unsuffixed


def test_offline_profiler_profiles_the_steps_trials_in_one_run(tmp_path: Path) -> None:
    """A GPU profile start-up and compile is the expensive part: the first trial's miss profiles them all."""
    from pytest_kforge.fsutil import atomic_write_gz_text

    root = make_toy_project(tmp_path)

    class Runner(FakeSuiteRunner):
        asked: list[tuple[str, ...]] = []

        def profile(self, kernel, version, *, out_dir, timeout_s, trials=("decode", "spec")):
            self.asked.append(tuple(trials))
            for t in trials:
                us = 50.0 if t == "decode" else 500.0
                atomic_write_gz_text(out_dir / kernel / version / f"{t}.json.gz", json.dumps(C.ProfileContract(
                    kernel, version, DECODE, [C.StageRow("main", us, 20.0, 60.0, 30.0, "Latency", "few CTAs")],
                    "Latency", "Few CTAs. Latency dominates.", []).to_dict()))  # where the profiler writes
            return super().profile(kernel, version, out_dir=out_dir, timeout_s=timeout_s, trials=trials)

    runner = Runner({})
    ctx = AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy", can_profile=True, runner=runner,
                       trials=("decode", "spec"))
    d = OfflineProfiler().profile("toy", "v1", "decode", DECODE, context=ctx)
    s = OfflineProfiler().profile("toy", "v1", "spec", DECODE, context=ctx)
    assert runner.asked == [("decode", "spec")]  # one profiling run for both trials
    assert (d.stages[0].duration_us, s.stages[0].duration_us) == (50.0, 500.0)
