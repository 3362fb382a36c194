"""Golden tests on the REAL H200 capture of 2026-12-02 (ncu 2025.3.1, --clock-control none).

Data: tests/data/ncu/h200-mla-{v0,v3}-{decode,spec}.csv.gz (``ncu --import --csv --page raw
--print-units base`` output, untrimmed, gzipped as reports keep them) and the recorded ``--query-metrics`` listings
(h200-query-metrics-*.txt).  The goldens under tests/data/ncu/golden/h200-* are rendered with a
fixed, empty opportunity source so that edits to docs/knowledge cannot break them; the real
knowledge base is exercised by ``test_real_knowledge_base_triggers_name_real_values``.

Regenerate the goldens after an intended change with ``python tests/test_profile_h200.py --regen``
and review the diff.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from pytest_kforge.profile.derive import is_derived
from pytest_kforge.profile.metrics import METRICS, _is_counter, check_metrics, parse_query_metrics
from pytest_kforge.profile.parse import parse_raw_csv, read_csv_text, write_csv_gz
from pytest_kforge.profile.report import build_report, knowledge_opportunities
from pytest_kforge.registry import load_kernel

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "ncu"
GOLDEN = DATA / "golden"
PARAMS = {"decode": {"b": 32, "s": 1, "t": 4096, "h": 128}, "spec": {"b": 32, "s": 16, "t": 4096, "h": 128}}
LANG = {"v0": "torch", "v3": "cutile-dsl"}
CASES = [(v, t) for v in ("v0", "v3") for t in ("decode", "spec")]


def _records(version: str, trial: str):
    return parse_raw_csv(read_csv_text(DATA / f"h200-mla-{version}-{trial}.csv.gz"))


def _golden_json(version: str, trial: str) -> Path:
    """The golden JSON of a case (gzipped since the checkout-size budget; a plain one is still read)."""
    plain = GOLDEN / f"h200-mla-{version}-{trial}.json"
    return plain if plain.exists() else plain.with_name(plain.name + ".gz")


def _no_kb(metrics, *, kernel_tags=(), language=None):
    return [], ["golden: knowledge base not consulted"]


def _report(version: str, trial: str, opportunities=_no_kb):
    spec = load_kernel("mla", ROOT / "kernels").spec
    p = PARAMS[trial]
    return build_report("mla", version, trial, p, _records(version, trial), flops=spec.flops(p),
                        min_bytes=spec.min_bytes(p), language=LANG[version], opportunities=opportunities)


# --- the metric table against what the H200's ncu lists -------------------------------------------

def test_every_counter_of_the_table_is_listed_on_the_h200() -> None:
    bases = parse_query_metrics((DATA / "h200-query-metrics-bases.txt").read_text())
    full = {ln.strip() for ln in (DATA / "h200-query-metrics-suffix-names.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}
    assert len(bases) > 100 and len(full) > 300  # the listings really are the recorded ones
    missing = [n for d in METRICS.values() for n in d.names() if _is_counter(n) and n not in full]
    assert missing == [], f"metrics.py names ncu 2025.3.1 does not list on the H200: {missing}"
    assert all(status in ("ok", "attribute") for _, status, _ in check_metrics(bases))


def test_tensor_fallback_choice_matches_the_h200() -> None:
    bases = parse_query_metrics((DATA / "h200-query-metrics-bases.txt").read_text())
    assert "sm__pipe_tensor_op_gmma_cycles_active" not in bases  # why it left the table
    assert "sm__pipe_tensor_op_hmma_cycles_active" in bases
    # v3 issues only wgmma; the hmma counter still reads the pipe busy, equal to pipe_tensor_cycles
    main = _records("v3", "spec")[0]
    hmma = main.raw["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"][0]
    allp = main.raw["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"][0]
    gmma_inst = main.raw["sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"][0]
    assert hmma == pytest.approx(51.36) and allp == pytest.approx(hmma) and gmma_inst == pytest.approx(7.55)
    assert main.metrics["tensor_pct"] == pytest.approx(51.36)
    assert main.sources["tensor_pct"].startswith("sm__pipe_tensor_op_hmma_cycles_active")


# --- key real values ------------------------------------------------------------------------------

def test_v3_decode_real_values() -> None:
    recs = _records("v3", "decode")
    assert len(recs) == 2
    main, comb = recs
    assert main.name.startswith("mla_v3_kernel") and comb.name.startswith("mla_combine_kernel")
    assert main.metrics["duration_us"] == pytest.approx(91.264) and comb.metrics["duration_us"] == pytest.approx(13.696)
    assert main.metrics["grid_size"] == 128 and main.metrics["registers_per_thread"] == 168
    assert comb.metrics["registers_per_thread"] == 253
    assert main.metrics["local_spill_bytes"] == 0 and comb.metrics["local_spill_bytes"] == 0
    assert main.metrics["tensor_pct"] == pytest.approx(45.46)
    assert main.metrics["dram_pct"] == pytest.approx(36.04)
    rep = _report("v3", "decode")
    m = rep.data["metrics"]
    assert m["duration_us"] == pytest.approx(104.96) and m["num_launches"] == 2
    # per-launch resources come from the 91 us main kernel, not the 14 us combine's 253 registers
    assert m["registers_per_thread"] == 168 and m["grid_size"] == 128
    assert rep.contract.bottleneck == "Latency"
    assert set(rep.data["verdict"]["causes"]) >= {"L2", "L3"}  # 128 CTAs < 132 SMs; occupancy ~15%


def test_v3_spec_real_values() -> None:
    recs = _records("v3", "spec")
    assert len(recs) == 1
    m = recs[0].metrics
    assert m["duration_us"] == pytest.approx(1217.728) and m["grid_size"] == 1024
    assert m["sm_pct"] == pytest.approx(49.48) and m["l2_hit_pct"] == pytest.approx(93.42)
    assert m["dram_pct"] == pytest.approx(5.28) and m["local_spill_bytes"] == 0
    rep = _report("v3", "spec")
    assert rep.contract.bottleneck == "Compute" and rep.data["verdict"]["rule"] == "C1"


def test_v0_real_values() -> None:
    for trial, n, total in (("decode", 31, 1813.7), ("spec", 32, 16714.2)):
        recs = _records("v0", trial)
        assert len(recs) == n
        assert sum(r.metrics["duration_us"] for r in recs) == pytest.approx(total, abs=0.1)
        assert any(r.name.startswith("sm80_xmma_gemm") for r in recs)


# --- golden markdown / JSON -----------------------------------------------------------------------

@pytest.mark.parametrize("version, trial", CASES)
def test_golden_markdown_and_json(version: str, trial: str) -> None:
    rep = _report(version, trial)
    assert rep.markdown == (GOLDEN / f"h200-mla-{version}-{trial}.md").read_text()
    want = json.loads(read_csv_text(_golden_json(version, trial)))  # read_csv_text: any text, .gz or not
    assert json.loads(json.dumps(rep.data)) == want


# --- the real knowledge base ----------------------------------------------------------------------

_TRIG = re.compile(r"([a-z][a-z0-9_]*)=(-?[0-9.]+)")


@pytest.mark.parametrize("version, trial", CASES)
def test_real_knowledge_base_triggers_name_real_values(version: str, trial: str) -> None:
    kb = ROOT / "docs" / "knowledge"
    if not (kb / "optimizations").is_dir():
        pytest.skip("docs/knowledge/optimizations does not exist in this checkout")

    def real_kb(metrics, *, kernel_tags=(), language=None):
        return knowledge_opportunities(metrics, kernel_tags=kernel_tags, language=language, root=kb)

    # v0 is torch: the knowledge base is asked for every DSL's entries (report.build_report)
    rep = _report(version, trial, opportunities=real_kb)
    opps = rep.contract.opportunities
    assert 1 <= len(opps) <= 3, rep.data["notes"]
    gains = [o.est_gain_pct for o in opps]
    assert gains == sorted(gains, reverse=True)
    m = rep.data["metrics"]
    for o in opps:
        assert is_derived(o.entry) or (ROOT / o.entry).is_file(), o.entry
        pairs = _TRIG.findall(o.trigger)
        assert pairs, o.trigger
        for key, val in pairs:  # every trigger quotes a value the real profile has
            assert key in m and float(val) == pytest.approx(m[key], abs=0.01), (o.name, key, val, m.get(key))


if __name__ == "__main__" and "--regen" in sys.argv:
    for v, t in CASES:
        r = _report(v, t)
        (GOLDEN / f"h200-mla-{v}-{t}.md").write_text(r.markdown)
        text = json.dumps(r.data, indent=1) + "\n"
        dest = _golden_json(v, t)
        if dest.name.endswith(".gz"):
            write_csv_gz(dest, text)  # deterministic gzip of any text
        else:
            dest.write_text(text)


def test_the_capture_names_its_card_and_the_report_keeps_it(tmp_path: Path) -> None:
    """A committed report may be read on another machine (the loop's PROFILE on an H100, or on a laptop): it
    carries the card its counters come from, read from the capture itself."""
    from pytest_kforge.profile.parse import display_name, read_csv_text
    from pytest_kforge.profile.run import profile_version

    assert display_name(read_csv_text(DATA / "h200-mla-v59_cute-decode.csv.gz")) == "NVIDIA H200"
    assert display_name("a,b\n,\n1,2\n") is None
    src = tmp_path / "rec"
    src.mkdir()
    (src / "decode.csv.gz").write_bytes((DATA / "h200-mla-v59_cute-decode.csv.gz").read_bytes())
    [out] = profile_version("mla", "v59_cute", trials=["decode"], root=ROOT, reports_dir=tmp_path / "reports",
                            from_csv=src, update_devlog=False)
    data = json.loads(read_csv_text(tmp_path / "reports" / "mla" / "v59_cute" / "decode.json.gz"))
    assert out.fault is None and data["gpu"] == "NVIDIA H200"
