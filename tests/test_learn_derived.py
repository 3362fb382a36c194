"""LEARN for a derived opportunity (issue 37): a version that tests one turns it into a knowledge entry.

Parent metrics are v59_cute's recorded spec/decode profile values (reports/mla/v59_cute/*.json.gz, run 25).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kforge.knowledge import KnowledgeBase
from pytest_kforge.knowledge.derived import verdict
from pytest_kforge.orchestrate.evaluate import decide
from pytest_kforge.orchestrate.learn import learn
from pytest_kforge.orchestrate.strategy import pick_entries
from pytest_kforge.profile.derive import DERIVED_MARK

#: v59_cute's parent metrics (decode: 128 CTAs on 132 SMs; spec: 1024 CTAs, 7.76 waves)
V59 = {"decode": {"duration_us": 69.6, "tensor_pct": 62.99, "tensor_idle_pct": 37.01, "tail_idle_pct": 3.0303,
                  "grid_size": 128.0, "waves_per_sm": 0.97, "pct_floor": 66.38},
       "spec": {"duration_us": 846.1, "tensor_pct": 76.67, "tensor_idle_pct": 23.33, "tail_idle_pct": 3.0303,
                "grid_size": 1024.0, "waves_per_sm": 7.76, "combine_share_pct": 0.48, "pct_floor": 87.39}}
CHANGE = "split the last wave's pages over the idle SMs (fill-the-last-wave)"
PLANNED = [{"name": "fill-the-last-wave", "title": "fill-the-last-wave"}]


def _results(decode: float, spec: float) -> dict:
    rows = [{"version": v, "trial": t, "median_us": us, "spread_pct": 0.5, "correct": True, "error": None}
            for v, d, s in (("v5", 73.1, 846.4), ("vN", decode, spec)) for t, us in (("decode", d), ("spec", s))]
    return {"results": rows, "correctness": [{"version": "vN", "test": "t", "passed": True, "message": ""}]}


def _learn(kb: KnowledgeBase, decode: float, spec: float, changes: list[str] | None = None) -> list[str]:
    return learn(kb, kernel="mla", parent="v59_cute", new="v61_cute", language="cute-dsl",
                 decision=decide(_results(decode, spec), "v5", "vN").to_dict(), planned=PLANNED,
                 changes=[CHANGE] if changes is None else changes, metrics=V59, gpu="NVIDIA H200")


def _kb(tmp_path: Path) -> KnowledgeBase:
    return KnowledgeBase(tmp_path / "docs" / "knowledge")


def test_a_kept_version_turns_the_derived_opportunity_into_an_optimisation(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    updates = _learn(kb, 71.0, 830.0)  # decode -2.9%, spec -1.9%
    assert any(u.startswith("add_entry(fill-the-last-wave)") and "-> optimization, kept" in u for u in updates), updates
    e = kb.get("fill-the-last-wave")
    assert e.kind == "optimization" and e.scope == "shared" and e.triggers == ["tail_idle_pct >= 1"]
    assert e.est_gain == pytest.approx(2.9, abs=0.05)  # the best measured gain where the condition held
    assert [r.change for r in e.evidence_rows("local")] == ["-2.9%", "-1.9%"]
    assert "derived by the profiler from the counters of v59_cute (decode: tail_idle_pct=3.03" in e.text
    assert kb.validate() == []
    # a second LEARN of the same name goes through the ordinary rules, never a second entry
    again = _learn(kb, 71.0, 830.0)
    assert not any(u.startswith("add_entry") for u in again) and len(kb.entries()) == 1


def test_a_version_slower_everywhere_refutes_it_as_an_anti_pattern(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    _learn(kb, 76.5, 871.0)  # +4.6%, +2.9%: beyond twice the spread on both trials
    e = kb.get("fill-the-last-wave")
    assert e.kind == "anti-pattern" and e.rel == "anti-patterns/fill-the-last-wave.md"
    assert kb.validate() == []


def test_within_noise_it_is_recorded_as_tested_with_no_gain(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    _learn(kb, 73.3, 846.0)
    e = kb.get("fill-the-last-wave")
    assert e.kind == "optimization" and e.est_gain == 0.0 and "no gain beyond noise" in e.text


def test_planned_but_not_applied_writes_nothing(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    updates = _learn(kb, 71.0, 830.0, changes=["KV_STAGES: 2 -> 3"])
    assert "fill-the-last-wave (derived from counters) was planned but not applied: nothing learned about it" \
        in updates
    assert kb.entries() == []


def test_verdict_counts_only_trials_where_the_condition_held() -> None:
    per = {"decode": {"gain_pct": -5.0, "noise_pct": 0.5}, "spec": {"gain_pct": 1.0, "noise_pct": 0.5}}
    assert verdict(per, ["decode"], kept=False)[0] == "anti-pattern"
    assert verdict(per, ["decode", "spec"], kept=False)[:2] == ("optimization", 0.0)
    assert verdict(per, ["spec"], kept=True)[:2] == ("optimization", 1.0)


def test_strategize_plans_a_derived_opportunity_by_its_name(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    opp = {"name": "fill-the-last-wave", "est_gain_pct": 3.0, "trigger": "tail_idle_pct=3.03", "entry": DERIVED_MARK}
    apply, _ = pick_entries(kb, V59, {"spec": {"opportunities": [opp]}}, kernel="mla", language="cute-dsl")
    assert [(a["name"], a["path"]) for a in apply] == [("fill-the-last-wave", "")]
