"""The agent contracts: exact markdown shape, parse errors that name the field, hypothesis round trips."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_kforge.contracts import (
    BaselineRow, Constraints, ContractError, NewVersionSummary, Opportunity, OptimizationTask,
    PlannedOptimization, ProfileContract, StageRow, TrialCheck, designer_launch_prompt, profiler_launch_prompt,
)

# ------------------------------------------------------------------------------ strategies
# printable ASCII plus the characters the markdown form must escape or normalise (|, \\, tabs, unicode)
_ALPHABET = "".join(chr(c) for c in range(32, 127)) + "\t\u00b5\u00e9\u2028\u3000|\\-;"
text = st.text(_ALPHABET, max_size=30).map(lambda s: " ".join(s.split()))
nonempty = text.filter(bool)
no_sep = nonempty.filter(lambda s: "--" not in s)
no_sep_or_empty = text.filter(lambda s: "--" not in s and s.lower() != "none")
# an item's first field may not start like the list's own number ("1." / "2)"): the parser strips that
item_name = no_sep.filter(lambda s: not re.match(r"\d+[.)](?:\s|$)", s))
ident = st.text("abcxyzABC019_.+-", min_size=1, max_size=8)
path = st.text("abcz019_/.-", min_size=1, max_size=16).filter(lambda p: p.lower() not in ("none", "-"))
num = st.floats(allow_nan=False, allow_infinity=False)
opt_num = st.none() | num
params = st.dictionaries(st.text("abhst", min_size=1, max_size=3), st.integers(0, 10**9),
                         min_size=1, max_size=5)

stage = st.builds(StageRow, nonempty, num, opt_num, opt_num, opt_num, text, text)
opportunity = st.builds(Opportunity, item_name, num, no_sep, no_sep_or_empty)
baseline = st.builds(BaselineRow, nonempty, text, text, text)
profile = st.builds(ProfileContract, ident, ident, params, st.lists(stage, min_size=1, max_size=3),
                    st.sampled_from(["Memory", "Compute", "Latency", "memory-bound", "Compute bound"]),
                    nonempty, st.lists(opportunity, max_size=3), st.lists(baseline, max_size=2))
planned = st.builds(PlannedOptimization, item_name, no_sep, no_sep_or_empty)
constraints = st.builds(Constraints, text, text, text, text)
task = st.builds(OptimizationTask, ident, ident, ident, nonempty, st.lists(planned, min_size=1, max_size=4),
                 constraints)
trial = st.builds(TrialCheck, st.integers(0, 4096), st.integers(0, 64), st.integers(0, 10**6), nonempty)
summary = st.builds(NewVersionSummary, ident, ident, st.lists(nonempty.filter(lambda s: ";" not in s),
                    min_size=1, max_size=4), st.lists(path, max_size=3), st.lists(path, max_size=3),
                    st.sampled_from(["PASS", "FAIL", "pass"]), st.lists(trial, max_size=3), path)

_fast = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_fast
@given(profile)
def test_profile_round_trip(p: ProfileContract) -> None:
    assert ProfileContract.parse(p.render()) == p
    assert ProfileContract.from_dict(p.to_dict()) == p


@_fast
@given(task)
def test_task_round_trip(t: OptimizationTask) -> None:
    assert OptimizationTask.parse(t.render()) == t
    assert OptimizationTask.from_dict(t.to_dict()) == t


@_fast
@given(summary)
def test_summary_round_trip(s: NewVersionSummary) -> None:
    assert NewVersionSummary.parse(s.render()) == s
    assert NewVersionSummary.from_dict(s.to_dict()) == s


# ------------------------------------------------------------------------------ exact shapes
def _profile() -> ProfileContract:
    return ProfileContract(
        "mla", "v1", {"b": 32, "s": 1, "t": 4096},
        [StageRow("splitkv", 61.2, 41.0, 70.5, 12.0, "Compute", "softmax not overlapped")],
        "Compute-bound", "The MMA waits for softmax. Nothing overlaps them.",
        [Opportunity("seesaw overlap", 20.0, "tensor_pct=41", "docs/knowledge/optimizations/a.md")],
        [BaselineRow("duration_us", "120", "61.2", "-49.0%")])


def test_profile_renders_the_seed_shape() -> None:
    assert _profile().render().splitlines() == [
        "## Profile: mla v1 | b=32, s=1, t=4096",
        "### Stages",
        "| Stage | Duration | TC% | DRAM% | Occ% | Bottleneck | Key Issue |",
        "|-------|----------|-----|-------|------|------------|-----------|",
        "| splitkv | 61.2 us | 41 | 70.5 | 12 | Compute | softmax not overlapped |",
        "### Bottleneck: Compute-bound",
        "Root cause: The MMA waits for softmax. Nothing overlaps them.",
        "### Top 3 Opportunities (ranked by estimated impact)",
        "1. seesaw overlap -- est. 20% gain -- trigger: tensor_pct=41 -- entry: docs/knowledge/optimizations/a.md",
        "",
        "### vs Baseline (if applicable)",
        "| Metric | Previous | Current | Change |",
        "|--------|----------|---------|--------|",
        "| duration_us | 120 | 61.2 | -49.0% |",
    ]


def test_task_and_summary_render_the_seed_headings() -> None:
    t = OptimizationTask("mla", "v1", "v2", "Compute-bound", [PlannedOptimization("fold s into M", "fills wgmma M")],
                         Constraints("168", "1 CTA/SM", "warpgroup", "none"))
    lines = t.render().splitlines()
    assert lines[:3] == ["## Optimization Task: mla v1 -> v2", "### Current Bottleneck: Compute-bound",
                         "### Optimizations to Apply:"]
    assert "### Constraints" in lines and "- Register budget: 168" in lines
    s = NewVersionSummary("mla", "v2", ["a"], ["kernels/mla/versions/v2.py"], [], "FAIL", [TrialCheck(32, 16, 4096, "spec")],
                          "docs/kernels/mla.md")
    heads = [ln for ln in s.render().splitlines() if ln.startswith("#")]
    assert heads == ["## New Version: mla v2", "### Changes Applied: a",
                     "### Files: Created: kernels/mla/versions/v2.py; Modified: none", "### Correctness: FAIL",
                     "### Trial Configurations Checked", "### Devlog Entry Written: docs/kernels/mla.md"]


def test_parse_tolerates_llm_variants() -> None:
    reply = """Here is the summary.

## New Version: mla v3
### Changes Applied:
- fold heads into M
- exp2 with folded scale
### Files: Created kernels/mla/versions/v3.py; Modified docs/kernels/mla.md
### Correctness: pass
### Trial Configurations Checked
1. [32, 1, 4096] -- decode default
### Devlog Entry Written: docs/kernels/mla.md
"""
    s = NewVersionSummary.parse(reply)
    assert s.changes == ["fold heads into M", "exp2 with folded scale"]
    assert s.files_modified == ["docs/kernels/mla.md"] and s.correctness == "PASS"
    assert s.trials == [TrialCheck(32, 1, 4096, "decode default")]


# ------------------------------------------------------------------------------ errors name the field
@pytest.mark.parametrize(("cut", "field"), [
    ("### Stages\n", "stages"),
    ("### Bottleneck: Compute-bound\n", "bottleneck"),
    ("Root cause: The MMA waits for softmax. Nothing overlaps them.\n", "root_cause"),
    ("### Top 3 Opportunities (ranked by estimated impact)\n", "opportunities"),
    ("## Profile: mla v1 | b=32, s=1, t=4096\n", "heading"),
])
def test_profile_missing_part_names_field(cut: str, field: str) -> None:
    text = _profile().render()
    assert cut in text
    with pytest.raises(ContractError) as ei:
        ProfileContract.parse(text.replace(cut, ""))
    assert ei.value.field == field
    assert field in str(ei.value) or "## Profile" in str(ei.value)
    assert str(ei.value).count(". ") == 0  # one sentence


@pytest.mark.parametrize(("old", "new", "field"), [
    ("Compute-bound\n", "Weird-bound\n", "bottleneck"),
    ("61.2 us", "fast us", "duration_us"),
    ("b=32, s=1", "b=lots, s=1", "params"),
    ("est. 20% gain", "est. big% gain", "est_gain_pct"),
    ("| 120 | 61.2 | -49.0% |", "| 120 | 61.2 |", "baseline"),
])
def test_profile_invalid_value_names_field(old: str, new: str, field: str) -> None:
    with pytest.raises(ContractError) as ei:
        ProfileContract.parse(_profile().render().replace(old, new))
    assert ei.value.field == field and field in str(ei.value)


@pytest.mark.parametrize(("label", "field"), [("Register budget", "register_budget"),
                                              ("Target occupancy", "target_occupancy"),
                                              ("Control level", "control_level"),
                                              ("Language constraints", "language_constraints")])
def test_task_missing_constraint_names_field(label: str, field: str) -> None:
    t = OptimizationTask("mla", "v1", "v2", "Memory", [PlannedOptimization("a", "b")], Constraints("1", "2", "3", "4"))
    text = "\n".join(ln for ln in t.render().splitlines() if not ln.startswith(f"- {label}"))
    with pytest.raises(ContractError) as ei:
        OptimizationTask.parse(text)
    assert ei.value.field == field and field in str(ei.value)


@pytest.mark.parametrize(("cut", "field"), [("### Correctness: PASS\n", "correctness"),
                                            ("### Devlog Entry Written: docs/kernels/mla.md\n", "devlog_path"),
                                            ("### Trial Configurations Checked\n", "trials")])
def test_summary_missing_part_names_field(cut: str, field: str) -> None:
    s = NewVersionSummary("mla", "v2", ["a"], [], ["x.py"], "PASS", [TrialCheck(1, 1, 1, "w")], "docs/kernels/mla.md")
    with pytest.raises(ContractError) as ei:
        NewVersionSummary.parse(s.render().replace(cut, ""))
    assert ei.value.field == field


def test_constructor_and_from_dict_errors() -> None:
    with pytest.raises(ContractError, match="correctness"):
        NewVersionSummary("mla", "v2", ["a"], [], [], "MAYBE", [], "d.md")
    with pytest.raises(ContractError, match="`root_cause`"):
        ProfileContract.from_dict({k: v for k, v in _profile().to_dict().items() if k != "root_cause"})
    with pytest.raises(ContractError, match="separator"):
        Opportunity("a -- b", 1.0, "x=1")
    assert isinstance(ContractError("x"), ValueError)


def test_launch_prompts_follow_the_seed() -> None:
    assert profiler_launch_prompt("mla", "v1", {"b": 32, "s": 16, "t": 4096}).splitlines() == [
        "Profile mla v1 at b=32, s=16, t=4096.", "Return compact summary per the output contract.",
        "Update the devlog performance section in docs/kernels/mla.md."]
    t = OptimizationTask("mla", "v1", "v2", "Memory", [PlannedOptimization("split-kv", "fill SMs")],
                         Constraints("1", "2", "3", "4"))
    p = designer_launch_prompt(t, "cute-dsl")
    assert p.startswith("Create mla v2 from v1.\nLanguage: cute-dsl.\nLoad /design-cute-dsl-kernel")
    assert "Apply optimizations: [split-kv (fill SMs)]." in p and OptimizationTask.parse(p) == t
    with pytest.raises(ContractError, match="language"):
        designer_launch_prompt(t, "triton")


def test_profile_parse_tolerates_fences_ms_and_bold() -> None:
    reply = """Some chatter first.
```markdown
## Profile: mla v2 | b=32, s=16, t=4096
### Stages
| Stage | Duration | TC% | DRAM% | Occ% | Bottleneck | Key Issue |
|---|---|---|---|---|---|---|
| splitkv | 1.21 ms | 41% | 12% | 11% | Compute | softmax serialised |
### Bottleneck: Compute-bound
**Root cause:** The MMA waits. Nothing overlaps.
### Top 3 Opportunities (ranked by estimated impact)
1. softmax-mma-overlap -- est. 15% gain -- trigger: tensor_pct=41
```
"""
    p = ProfileContract.parse(reply)
    assert p.stages[0].duration_us == 1210.0 and p.stages[0].tc_pct == 41.0
    assert p.root_cause == "The MMA waits. Nothing overlaps." and p.baseline == []
    assert p.opportunities == [Opportunity("softmax-mma-overlap", 15.0, "tensor_pct=41")]


@_fast
@given(st.one_of(stage, opportunity, baseline, planned, constraints, trial))
def test_every_part_round_trips(part: object) -> None:
    cls = type(part)
    assert cls.parse(part.render()) == part  # type: ignore[attr-defined]
    assert cls.from_dict(part.to_dict()) == part  # type: ignore[attr-defined]


def test_part_parse_errors_name_the_field() -> None:
    with pytest.raises(ContractError) as ei:
        StageRow.parse("not a row")
    assert ei.value.field == "stages"
    with pytest.raises(ContractError) as ei:
        TrialCheck.parse("1. b=32 -- why")
    assert ei.value.field == "trials"
    assert Opportunity.parse("2. a -- est. 5% gain -- trigger: sm_pct=1") == Opportunity("a", 5, "sm_pct=1")
    # a name that starts like the list's own number would lose it on the way back: refused, naming the field
    for cls, args in ((Opportunity, ("0.", 0, "x=1")), (PlannedOptimization, ("3) fold", "why"))):
        with pytest.raises(ContractError, match="reads as the list's own number") as ei:
            cls(*args)
        assert ei.value.field == "name"
    assert Opportunity("0.5x occupancy", 1, "x=1").name == "0.5x occupancy"
