"""Golden tests: reports rendered from recorded ncu CSVs (the synthetic ones until H200 data lands)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from pytest_kforge.contracts import Opportunity, ProfileContract
from pytest_kforge.profile.derive import is_derived
from pytest_kforge.profile.parse import parse_raw_csv
from pytest_kforge.profile.report import (build_report, load_report_json, perf_block, report_json_path, stage_name,
                                          write_report)
from pytest_kforge.registry import load_kernel

DATA = Path(__file__).parent / "data" / "ncu"
GOLDEN = DATA / "golden"
KERNELS = Path(__file__).resolve().parents[1] / "kernels"
DECODE = {"b": 32, "s": 1, "t": 4096, "h": 128}


def fake_kb(metrics, *, kernel_tags=(), language=None):
    """A stand-in knowledge base with two triggers, so ranking and trigger text are exercised."""
    opps = []
    if metrics.get("dram_pct", 0) >= 60:
        opps.append(Opportunity("fp8-kv-cache", 30.0, f"dram_pct={metrics['dram_pct']:.1f}",
                                "docs/knowledge/optimizations/fp8-kv-cache.md"))
    if metrics.get("achieved_occupancy_pct", 100) < 25:
        opps.append(Opportunity("split-kv-more-ctas", 12.5,
                                f"achieved_occupancy_pct={metrics['achieved_occupancy_pct']:.1f}",
                                "docs/knowledge/optimizations/split-kv-more-ctas.md"))
    if metrics.get("num_launches", 0) >= 2:
        opps.append(Opportunity("fuse-combine", 45.0, f"num_launches={metrics['num_launches']:.0f}",
                                "docs/knowledge/optimizations/fuse-combine.md"))
    opps.sort(key=lambda o: -o.est_gain_pct)
    return opps[:3], []


def _report(version: str, baseline=None):
    spec = load_kernel("mla", KERNELS).spec
    recs = parse_raw_csv((DATA / f"synthetic-mla-{version}-decode.csv").read_text())
    names = {"splitkv": "split-KV main pass", "combine": "combine pass"} if version == "v1" else None
    return build_report("mla", version, "decode", DECODE, recs, flops=spec.flops(DECODE),
                        min_bytes=spec.min_bytes(DECODE), stage_names=names,
                        language="torch" if version == "v0" else "cutile-dsl", baseline=baseline,
                        opportunities=fake_kb)


def _pair():
    v0 = _report("v0")
    v1 = _report("v1", baseline=v0.data)
    return v0, v1


@pytest.mark.parametrize("which", ["v0", "v1"])
def test_golden_markdown_and_json(which: str) -> None:
    rep = dict(zip(("v0", "v1"), _pair()))[which]
    assert rep.markdown == (GOLDEN / f"synthetic-mla-{which}-decode.md").read_text()
    want = json.loads(gzip.decompress((GOLDEN / f"synthetic-mla-{which}-decode.json.gz").read_bytes()))
    assert json.loads(json.dumps(rep.data)) == want


def test_markdown_has_the_seed_shape_and_parses_back() -> None:
    _, v1 = _pair()
    lines = v1.markdown.splitlines()
    assert lines[0] == "## Profile: mla v1 | b=32, s=1, t=4096, h=128"
    assert lines[1] == "### Stages"
    assert lines[2] == "| Stage | Duration | TC% | DRAM% | Occ% | Bottleneck | Key Issue |"
    assert "### Bottleneck: Memory-bound" in lines
    assert any(ln.startswith("Root cause: ") for ln in lines)
    assert "### Top 3 Opportunities (ranked by estimated impact)" in lines
    assert "### vs Baseline (if applicable)" in lines
    assert ProfileContract.parse(v1.markdown) == v1.contract
    # stage names from STAGE_NAMES, ranked opportunities naming entry and trigger
    assert [s.stage for s in v1.contract.stages] == ["split-KV main pass", "combine pass"]
    gains = [o.est_gain_pct for o in v1.contract.opportunities]
    assert gains == sorted(gains, reverse=True) and len(gains) <= 3
    assert v1.contract.opportunities[0].trigger == "num_launches=2"


def test_baseline_compares_with_parent() -> None:
    v0, v1 = _pair()
    rows = {r.metric: r for r in v1.contract.baseline}
    prev = v0.data["metrics"]["duration_us"]
    cur = v1.data["metrics"]["duration_us"]
    assert rows["duration_us"].change == f"{(cur - prev) / prev * 100:+.1f}%"
    assert rows["dram_pct"].change.endswith(" pp")
    assert _report("v1").contract.baseline == []  # no baseline, no section


def test_empty_opportunities_say_why() -> None:
    spec = load_kernel("mla", KERNELS).spec
    recs = parse_raw_csv((DATA / "synthetic-mla-v1-decode.csv").read_text())
    rep = build_report("mla", "v1", "decode", DECODE, recs, flops=spec.flops(DECODE), min_bytes=spec.min_bytes(DECODE),
                       opportunities=lambda m, **kw: ([], ["no knowledge-base entry matches these metrics"]),
                       derive_opportunities=False)
    assert "(none: no knowledge-base entry matches these metrics)" in rep.markdown
    assert ProfileContract.parse(rep.markdown).opportunities == []


def test_real_knowledge_base_is_used(tmp_path: Path) -> None:
    kb = pytest.importorskip("pytest_kforge.knowledge")
    root = tmp_path / "docs" / "knowledge"
    base = kb.KnowledgeBase(root=root)
    base.add_entry("stream-kv-once", kind="optimization", scope="shared", title="Stream KV once",
                   contexts=["MLA decode"], triggers=["dram_pct > 50"], est_gain=20.0, mechanism="m",
                   affected_metrics=["dram_pct"], implementation="x = 1", generalization="g", pitfalls=["p"],
                   interactions=["i"], evidence=[("decode", "100 us", "80 us", "-20%")])
    spec = load_kernel("mla", KERNELS).spec
    recs = parse_raw_csv((DATA / "synthetic-mla-v1-decode.csv").read_text())
    rep = build_report("mla", "v1", "decode", DECODE, recs, flops=spec.flops(DECODE),
                       min_bytes=spec.min_bytes(DECODE), language="cutile-dsl", knowledge_root=root)
    [opp] = [o for o in rep.contract.opportunities if not is_derived(o.entry)]
    assert opp.name == "stream-kv-once" and opp.est_gain_pct == 20.0
    assert "dram_pct=" in opp.trigger and opp.entry.endswith("stream-kv-once.md")
    assert len(rep.contract.opportunities) == 3  # one match: the counters give the other two


def test_report_twin_is_gzipped_and_an_older_plain_twin_still_reads(tmp_path: Path) -> None:
    v0, _v1 = _pair()
    out = tmp_path / "reports" / "mla" / "v0"
    out.mkdir(parents=True)
    (out / "decode.json").write_text(json.dumps(v0.data))  # as versions before the gzipped twin wrote it
    assert report_json_path(out, "decode") == out / "decode.json"
    assert load_report_json(out / "decode.json")["version"] == "v0"
    assert "| v0 | decode |" in perf_block(tmp_path / "reports", "mla")
    _md, js = write_report(v0, out)
    assert js == out / "decode.json.gz" and not (out / "decode.json").exists()  # the plain twin is replaced
    first = js.read_bytes()
    write_report(v0, out)
    assert js.read_bytes() == first  # no timestamp in the gzip header: same report, same bytes
    assert load_report_json(out / "decode.json") == load_report_json(js) == json.loads(json.dumps(v0.data))
    js.write_bytes(first[: len(first) // 2])  # a truncated twin reads as missing, it does not raise
    assert load_report_json(js) is None and load_report_json(out / "spec.json") is None


def test_write_report_and_perf_block(tmp_path: Path) -> None:
    v0, v1 = _pair()
    write_report(v0, tmp_path / "reports" / "mla" / "v0")
    md, js = write_report(v1, tmp_path / "reports" / "mla" / "v1")
    assert md.read_text() == v1.markdown and js.name == "decode.json.gz" and load_report_json(js)["version"] == "v1"
    block = perf_block(tmp_path / "reports", "mla")
    rows = [ln for ln in block.splitlines() if ln.startswith("| v")]
    assert [r.split("|")[1].strip() for r in rows] == ["v0", "v1"]
    assert "fuse-combine" in rows[1] and "(../../reports/mla/v1/decode.md)" in rows[1]
    # the key counters sit in their columns: header and rows have the same number of cells
    header = next(ln for ln in block.splitlines() if ln.startswith("| Version"))
    cells = [c.strip() for c in header.split("|")[1:-1]]
    assert cells[2] == "Card" and cells[5:10] == ["TC %", "DRAM %", "Occ %", "Regs", "Local B"]
    m = v1.data["metrics"]
    got = dict(zip(cells, (c.strip() for c in rows[1].split("|")[1:-1])))
    assert len(got) == len(cells)
    assert got["TC %"] == f"{m['tensor_pct']:.0f}" and got["DRAM %"] == f"{m['dram_pct']:.0f}"
    assert got["Card"] == "-"  # a synthetic report names no card


@pytest.mark.parametrize("raw, want", [
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
     "reduce_kernel"),
    ("mla_splitkv_fwd_kernel", "mla_splitkv_fwd_kernel"),
    ("x" * 60, "x" * 45 + "..."),
])
def test_stage_name(raw: str, want: str) -> None:
    assert stage_name(raw) == want
    assert stage_name(raw, {raw[:5]: "friendly"}) == "friendly"


def _regen() -> None:  # python tests/test_profile_report.py --regen
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for which, rep in zip(("v0", "v1"), _pair()):
        (GOLDEN / f"synthetic-mla-{which}-decode.md").write_text(rep.markdown)
        (GOLDEN / f"synthetic-mla-{which}-decode.json.gz").write_bytes(
            gzip.compress((json.dumps(rep.data, indent=1) + "\n").encode(), mtime=0))


if __name__ == "__main__" and "--regen" in sys.argv:
    _regen()
