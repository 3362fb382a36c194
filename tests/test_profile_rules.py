"""Each bottleneck rule, with a case that makes it fire and one that does not."""

from __future__ import annotations

import pytest

from pytest_kforge.profile.rules import THRESHOLDS, aggregate, classify, key_issue, latency_causes, root_cause

BASE = {"duration_us": 100.0, "dram_pct": 20.0, "sm_pct": 20.0, "tensor_pct": 10.0, "mem_pct": 30.0,
        "achieved_occupancy_pct": 50.0, "theoretical_occupancy_pct": 50.0, "grid_size": 1024.0, "num_sms": 132.0,
        "local_spill_bytes": 0.0, "registers_per_thread": 128.0, "shared_mem_per_block_kb": 64.0,
        "l2_hit_pct": 40.0, "dram_read_mb": 100.0}


def m(**kw: float) -> dict[str, float]:
    return {**BASE, **kw}


@pytest.mark.parametrize("metrics, kind, rule, bound", [
    (m(dram_pct=60.0, tensor_pct=49.9), "Memory", "M1", None),          # fires at the threshold
    (m(dram_pct=85.0, tensor_pct=55.0), "Compute", "C1", None),         # tensor busy: not M1
    (m(dram_pct=59.9, tensor_pct=10.0), "Latency", "L5", None),          # just under: not M1
    (m(tensor_pct=50.0), "Compute", "C1", None),
    (m(tensor_pct=49.9), "Latency", "L5", None),
    (m(sm_pct=60.0), "Compute", "C2", "compute"),
    (m(sm_pct=60.0), "Latency", "L5", "memory"),                          # C2 needs the roofline to say compute
    (m(sm_pct=59.9), "Latency", "L5", "compute"),
    (m(mem_pct=70.0), "Memory", "M2", None),
    (m(mem_pct=69.9), "Latency", "L5", None),
])
def test_classes(metrics, kind, rule, bound) -> None:
    v = classify(metrics, roofline_bound=bound)
    assert (v.kind, v.rule) == (kind, rule)


@pytest.mark.parametrize("extra, fires", [
    ({"local_spill_bytes": THRESHOLDS["spill_bytes"]}, "L1"),
    ({"local_spill_bytes": THRESHOLDS["spill_bytes"] - 1}, None),
    ({"grid_size": 131.0}, "L2"),
    ({"grid_size": 132.0}, None),
    ({"achieved_occupancy_pct": 24.9}, "L3"),
    ({"achieved_occupancy_pct": 25.0}, None),
    ({"num_launches": 5.0, "duration_us": 49.0}, "L4"),
    ({"num_launches": 4.0, "duration_us": 20.0}, None),                  # too few launches
    ({"num_launches": 5.0, "duration_us": 50.0}, None),                  # launches not short
])
def test_latency_causes(extra, fires) -> None:
    causes = latency_causes(m(**extra))
    if fires:
        assert fires in causes
        v = classify(m(**extra))
        assert v.kind == "Latency" and v.causes[0] == fires
    else:
        assert causes == ("L5",)


def test_latency_lists_every_cause_in_order() -> None:
    v = classify(m(local_spill_bytes=5e6, grid_size=64.0, achieved_occupancy_pct=10.0))
    assert v.causes == ("L1", "L2", "L3")
    text = root_cause(m(local_spill_bytes=5e6, grid_size=64.0, achieved_occupancy_pct=10.0), v)
    assert text.count(". ") >= 1 and "spill" in text and "64 CTAs" in text
    assert "spills 5 MB" in key_issue(m(local_spill_bytes=5e6, grid_size=64.0, achieved_occupancy_pct=10.0), v)


@pytest.mark.parametrize("metrics, needle", [
    (m(dram_pct=80.0), "DRAM at 80% of peak"),
    (m(tensor_pct=70.0), "tensor pipe 70%"),
    (m(mem_pct=75.0), "L1/L2 path"),
    (m(achieved_occupancy_pct=10.0), "occupancy is 10%"),
])
def test_root_cause_is_two_sentences_with_numbers(metrics, needle) -> None:
    text = root_cause(metrics, classify(metrics))
    assert needle in text
    assert text.rstrip(".").count(". ") == 1


def test_aggregate_weights_by_time() -> None:
    a = {"duration_us": 90.0, "dram_pct": 80.0, "dram_read_mb": 100.0, "registers_per_thread": 200.0, "grid_size": 64.0}
    b = {"duration_us": 10.0, "dram_pct": 10.0, "dram_read_mb": 5.0, "registers_per_thread": 32.0, "grid_size": 9000.0}
    agg = aggregate([a, b])
    assert agg["duration_us"] == 100.0 and agg["num_launches"] == 2
    assert agg["dram_pct"] == pytest.approx(73.0)
    assert agg["dram_read_mb"] == 105.0 and agg["registers_per_thread"] == 200.0
    assert agg["grid_size"] == 64.0  # the longest stage's launch shape
