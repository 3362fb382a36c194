"""The knowledge base: the real entries validate, malformed ones fail, triggers, ranking, LEARN updates."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_kforge.contracts import Opportunity
from pytest_kforge.knowledge import (
    KINDS, SCOPES, SECTIONS, EvidenceRow, KnowledgeBase, KnowledgeError, TriggerError, main, parse_trigger,
)

REPO = Path(__file__).resolve().parents[1]
REAL_KB = REPO / "docs" / "knowledge"
REAL_CATALOG = REPO / "agents" / "skills" / "optimization-catalog" / "SKILL.md"


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    """A copy of the real knowledge base and catalog in the same layout as the repository."""
    shutil.copytree(REAL_KB, tmp_path / "docs" / "knowledge")
    cat = tmp_path / "agents" / "skills" / "optimization-catalog" / "SKILL.md"
    cat.parent.mkdir(parents=True)
    shutil.copy(REAL_CATALOG, cat)
    k = KnowledgeBase(tmp_path / "docs" / "knowledge")
    assert k.catalog == cat
    return k


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# ------------------------------------------------------------------------------ the real base
def test_real_knowledge_base_is_valid() -> None:
    kb = KnowledgeBase(REAL_KB)
    assert kb.catalog.resolve() == REAL_CATALOG.resolve()
    assert kb.validate() == []
    entries = kb.entries()
    assert len(entries) >= 14
    assert {e.kind for e in entries} == set(KINDS)
    assert {e.scope for e in entries} == set(SCOPES)
    for scope in ("cutile-dsl", "cute-dsl"):
        assert {e.kind for e in entries if e.scope == scope} == set(KINDS), scope
    for e in entries:
        assert e.evidence_rows("local") or e.evidence_rows("external"), e.name
        assert all(s in e.sections for s in SECTIONS)


def test_cli_match_prints_contract_opportunities(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--root", str(REAL_KB), "match", "achieved_occupancy_pct=12", "dram_pct=35", "tensor_pct=25",
               "--tags", "mla"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0 and lines
    opps = [Opportunity.parse_item(ln) for ln in lines]
    assert [o.est_gain_pct for o in opps] == sorted((o.est_gain_pct for o in opps), reverse=True)
    assert all(Path(o.entry).is_file() for o in opps)
    assert main(["--root", str(REAL_KB), "validate"]) == 0


# ------------------------------------------------------------------------------ malformed entries
@pytest.mark.parametrize(("old", "new", "needle"), [
    ("## Pitfalls\n", "## Pitfals\n", "missing section(s) ## Pitfalls"),
    ("triggers: [\"waves_per_sm < 0.75 and pct_floor < 70\"",
     "triggers: [\"waves_per_sm << 0.75 and pct_floor < 70\"", "expected a number"),
    ("triggers: [\"waves_per_sm < 0.75 and pct_floor < 70\"",
     "triggers: [\"waves < 1\"", "unknown metric"),
    ("kind: optimization", "kind: trick", "kind 'trick' is not one of"),
    ("name: split-kv-combine", "name: split-kv", "differs from the file name"),
    ("est_gain: 40", "est_gain: lots", "est_gain must be a number"),
    ("scope: shared\n", "scope: [shared\n", "not valid YAML"),
    ("evidence: local", "evidence: hearsay", "is not local or external"),
    ("- Metric condition: `waves_per_sm < 0.75", "- Metric condition: `waves_per_sm < 2", "does not list the front-matter"),
])
def test_malformed_entry_fails_validate(kb: KnowledgeBase, old: str, new: str, needle: str | None) -> None:
    path = kb.root / "optimizations" / "split-kv-combine.md"
    _edit(path, old, new)
    problems = [p for p in kb.validate() if p.startswith("optimizations/split-kv-combine.md")]
    assert problems, "the malformed entry passed validate"
    if needle:
        assert any(needle in p for p in problems), problems


def test_implementation_without_code_fails(kb: KnowledgeBase) -> None:
    path = kb.root / "optimizations" / "exp2-folded-scale.md"
    text = path.read_text()
    start = text.index("## Implementation\n") + len("## Implementation\n")
    path.write_text(text[:start] + "Use exp2.\n\n" + text[text.index("## Performance Evidence"):])
    assert any("no fenced code snippet" in p for p in kb.validate())


def test_catalog_row_without_file_fails(kb: KnowledgeBase) -> None:
    (kb.root / "anti-patterns" / "timing-on-warm-l2.md").unlink()
    assert any("row 'timing-on-warm-l2' points at anti-patterns/timing-on-warm-l2.md, which does not exist" in p
               for p in kb.validate())


def test_file_without_row_fails(kb: KnowledgeBase) -> None:
    src = kb.root / "optimizations" / "exp2-folded-scale.md"
    dst = kb.root / "optimizations" / "exp2-copy.md"
    dst.write_text(src.read_text().replace("name: exp2-folded-scale", "name: exp2-copy"))
    problems = kb.validate()
    assert "optimizations/exp2-copy.md: no row in the catalog (SKILL.md); run `python -m pytest_kforge.knowledge " \
           "sync`" in problems
    kb.sync_catalog()
    assert kb.validate() == []


def test_stale_row_and_misplaced_file_fail(kb: KnowledgeBase) -> None:
    _edit(kb.root / "optimizations" / "exp2-folded-scale.md", "est_gain: 3", "est_gain: 4")
    assert any("row 'exp2-folded-scale' is out of date" in p for p in kb.validate())
    (kb.root / "languages" / "cute-dsl" / "stray.md").write_text("# stray\n")
    assert any("stray.md: not in the layout" in p for p in kb.validate())


# ------------------------------------------------------------------------------ triggers
def test_trigger_language() -> None:
    t = parse_trigger("dram_pct > 70 and (tensor_pct < 30 or achieved_occupancy_pct <= 12.5)")
    assert t.holds({"dram_pct": 80, "tensor_pct": 50, "achieved_occupancy_pct": 12.5})
    assert not t.holds({"dram_pct": 80, "tensor_pct": 50, "achieved_occupancy_pct": 13})
    assert not t.holds({"tensor_pct": 10})  # an unmeasured metric never holds
    assert t.metrics() == ["dram_pct", "tensor_pct", "achieved_occupancy_pct"]
    assert t.describe({"dram_pct": 83.14159, "tensor_pct": 12}) == "dram_pct=83.14, tensor_pct=12"
    # `and` binds tighter than `or`
    assert parse_trigger("sm_pct > 1 or sm_pct > 5 and dram_pct > 5").holds({"sm_pct": 2, "dram_pct": 0})


@pytest.mark.parametrize(("text", "needle"), [
    ("", "empty"), ("dram_pct", "comparison operator"), ("dram_pct > ", "a number"),
    ("dram > 5", "unknown metric"), ("dram_pct > 5 sm_pct < 3", "'and', 'or' or the end"),
    ("__import__('os').system('true')", "unexpected character"), ("dram_pct > 5; x", "unexpected character"),
    ("(dram_pct > 5", "')'"), ("5 < dram_pct", "a metric name"),
])
def test_trigger_errors_are_one_clear_sentence(text: str, needle: str) -> None:
    with pytest.raises(TriggerError) as ei:
        parse_trigger(text)
    assert needle in str(ei.value) and "\n" not in str(ei.value)


_OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["dram_pct", "sm_pct", "tensor_pct"]), st.sampled_from(sorted(_OPS)),
                          st.integers(0, 100)), min_size=1, max_size=4),
       st.lists(st.sampled_from(["and", "or"]), min_size=3, max_size=3),
       st.fixed_dictionaries({k: st.integers(0, 100) for k in ("dram_pct", "sm_pct", "tensor_pct")}))
def test_trigger_matches_reference_semantics(cmps: list[tuple[str, str, int]], joins: list[str],
                                             metrics: dict[str, int]) -> None:
    text = cmps[0][0] + f" {cmps[0][1]} {cmps[0][2]}"
    for (m, op, v), j in zip(cmps[1:], joins):
        text += f" {j} {m} {op} {v}"
    # reference: or of and-groups, evaluated directly
    groups: list[list[bool]] = [[]]
    for i, (m, op, v) in enumerate(cmps):
        if i and joins[i - 1] == "or":
            groups.append([])
        groups[-1].append(_OPS[op](metrics[m], v))
    assert parse_trigger(text).holds(metrics) == any(all(g) for g in groups)


# ------------------------------------------------------------------------------ match
def test_match_ranks_by_gain_and_filters(kb: KnowledgeBase) -> None:
    metrics = {"achieved_occupancy_pct": 10, "dram_pct": 30, "tensor_pct": 20, "sm_pct": 30, "pct_floor": 20,
               "local_spill_bytes": 4096, "registers_per_thread": 255, "waves_per_sm": 0.5}
    found = kb.match(metrics, kernel_tags=("mla",))
    gains = [m.est_gain_pct for m in found]
    assert gains == sorted(gains, reverse=True) and len(found) >= 5
    names = [m.entry.name for m in found]
    assert "register-spill-large-accumulator" in names and "split-kv-combine" in names
    assert next(m for m in found if m.entry.name == "register-spill-large-accumulator").trigger == \
        "local_spill_bytes=4096"
    cutile = kb.match(metrics, kernel_tags=("mla",), language="cutile-dsl")
    assert all("cutile-dsl" in m.entry.languages for m in cutile)
    assert "warp-specialization-producer-consumer" in names and \
        "warp-specialization-producer-consumer" not in [m.entry.name for m in cutile]
    only_softmax = kb.match(metrics, kernel_tags=("softmax",))
    assert all("softmax" in m.entry.applies_to or "any" in m.entry.applies_to for m in only_softmax)
    assert kb.match({}, kernel_tags=("mla",)) == []
    opt_only = kb.match(metrics, kinds=("optimization",))
    assert all(m.entry.kind == "optimization" for m in opt_only)


# ------------------------------------------------------------------------------ updates
def test_updates_round_trip_and_keep_human_text(kb: KnowledgeBase) -> None:
    path = kb.root / "optimizations" / "split-kv-combine.md"
    human = "Human note: measured by hand on 2026-12-02, keep me."
    _edit(path, "## Generalization\n", f"{human}\n\n## Generalization\n")
    _edit(path, "## Mechanism\n", "## Mechanism\nA human sentence at the top of Mechanism.\n")
    _edit(kb.catalog, "## Anti-patterns\n", "A human paragraph in the catalog.\n\n## Anti-patterns\n")

    e = kb.add_evidence("split-kv-combine", EvidenceRow("mla decode b=32 s=1 t=4096 h=128, H200", "120 us", "61 us",
                                                        "-49%"), "local", citation="pytest --kernel mla (run 7)")
    assert e.evidence == "local" and e.evidence_rows("local")[-1].after == "61 us"
    assert "- mla decode b=32 s=1 t=4096 h=128, H200: pytest --kernel mla (run 7)" in e.text
    assert "_No rows yet._" not in (e.text.split("### External evidence")[0])
    e = kb.add_evidence("split-kv-combine", {"config": "spec b=32 s=16", "before": "1", "after": "2",
                                             "change": "+100%"}, "external")
    assert len(e.evidence_rows("external")) == 3

    e = kb.narrow_conditions("split-kv-combine", ["achieved_occupancy_pct < 20"], reason="no gain at 25%")
    assert e.triggers == ["achieved_occupancy_pct < 20"] and "no gain at 25%" in e.sections["Pitfalls"]
    assert "split-kv-combine" in [m.entry.name for m in kb.match({"achieved_occupancy_pct": 15, "dram_pct": 10})]
    assert "split-kv-combine" not in [m.entry.name for m in kb.match({"achieved_occupancy_pct": 25, "dram_pct": 10})]

    e = kb.to_anti_pattern("split-kv-combine", "slower than v1 at b=32 on the H200")
    assert e.kind == "anti-pattern" and e.rel == "anti-patterns/split-kv-combine.md"
    assert not path.exists() and (kb.root / e.rel).exists()
    assert "Anti-pattern since" in e.text
    text = e.text
    for kept in (human, "A human sentence at the top of Mechanism.", "spec b=32 s=16", "61 us"):
        assert kept in text
    assert "A human paragraph in the catalog." in kb.catalog.read_text()
    # interactions in other entries link to the old path: validate says so (the LEARN step fixes links)
    problems = kb.validate()
    assert problems and all("points at no file" in p for p in problems)
    with pytest.raises(KnowledgeError, match="already an anti-pattern"):
        kb.to_anti_pattern("split-kv-combine", "again")


def test_add_entry_and_errors(kb: KnowledgeBase) -> None:
    fields = dict(kind="optimization", scope="cute-dsl", title="Persistent CTAs", contexts=["Any decode kernel"],
                  triggers=["achieved_occupancy_pct < 20"], est_gain=12, mechanism="Loop over work tiles.",
                  affected_metrics=["occupancy"], implementation="for tile in range(bid, n, grid): ...",
                  generalization="Amortise launch and prologue.", pitfalls=["load imbalance"],
                  interactions=["none"], applies_to=["mla"], evidence=[("b=32", "60 us", "55 us", "-8%")],
                  source="local", citation="H200 run")
    e = kb.add_entry("persistent-ctas", **fields)
    assert e.rel == "languages/cute-dsl/optimizations/persistent-ctas.md" and e.languages == ["cute-dsl"]
    assert kb.validate() == []
    assert "persistent-ctas" in kb.catalog.read_text()
    with pytest.raises(KnowledgeError, match="exists"):
        kb.add_entry("persistent-ctas", **fields)
    with pytest.raises(TriggerError):
        kb.add_entry("bad-trigger", **{**fields, "triggers": ["occupancy < 5"]})
    assert not (kb.root / "languages" / "cute-dsl" / "optimizations" / "bad-trigger.md").exists()
    with pytest.raises(KnowledgeError, match="neither 'local'"):
        kb.add_evidence("persistent-ctas", ("a", "b", "c", "d"), "hearsay")
    with pytest.raises(KnowledgeError, match="no knowledge entry named"):
        kb.narrow_conditions("nope", ["dram_pct > 1"])
    text = e.text.replace("name: persistent-ctas", "name: persistent-ctas-2")
    assert kb.add_entry_text(text).name == "persistent-ctas-2" and kb.validate() == []
    with pytest.raises(KnowledgeError, match="would be malformed"):
        kb.add_entry_text(text.replace("persistent-ctas-2", "broken-one").replace("## Pitfalls", "## Pits"))


def test_fresh_base_gets_its_own_catalog(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb")
    assert kb.catalog == tmp_path / "kb" / "CATALOG.md"
    kb.add_entry("x-y", kind="anti-pattern", scope="shared", title="X", contexts=["any"], triggers=["sm_pct > 1"],
                 est_gain=1, mechanism="m", affected_metrics=["a"], implementation="pass", generalization="g",
                 pitfalls=["p"], interactions=["i"], evidence=[("c", "b", "a", "ch")], source="external")
    assert kb.validate() == [] and "| x-y | X | shared |" in kb.catalog.read_text()


def test_add_pitfall_appends_a_dated_note_and_keeps_human_text(kb: KnowledgeBase) -> None:
    path = kb.root / "optimizations" / "split-kv-combine.md"
    path.write_text(path.read_text() + "\nA human remark.\n")
    kb.add_pitfall("split-kv-combine", "forcing 2 splits on a full grid cost +26% (spec)")
    text = path.read_text()
    assert "forcing 2 splits on a full grid cost +26% (spec)" in text and "A human remark." in text
    assert kb.validate() == []
    with pytest.raises(Exception, match="non-empty note"):
        kb.add_pitfall("split-kv-combine", "  ")


def test_entries_match_a_kernel_by_its_spec_tags_not_only_its_name() -> None:
    """rmsnorm_fp8's entries say applies_to "rmsnorm": the profiler and the loop match by the kernel's name and its
    spec's tags (registry.kernel_tags), so they find them for a latency-bound decode of that kernel."""
    from pytest_kforge.knowledge import KnowledgeBase
    from pytest_kforge.registry import kernel_tags

    root = Path(__file__).resolve().parents[1]
    tags = kernel_tags("rmsnorm_fp8", root / "kernels")
    assert tags[0] == "rmsnorm_fp8" and "rmsnorm" in tags
    assert kernel_tags("no_such_kernel", root / "kernels") == ("no_such_kernel",)
    kb = KnowledgeBase(root / "docs" / "knowledge")
    decode = {"duration_us": 4.7, "dram_pct": 12.0, "achieved_occupancy_pct": 6.0, "pct_floor": 14.0}
    by_tags = {m.entry.name for m in kb.match(decode, kernel_tags=tags)}
    by_name = {m.entry.name for m in kb.match(decode, kernel_tags=("rmsnorm_fp8",))}
    assert "prefetch-weight-with-input" in by_tags - by_name
