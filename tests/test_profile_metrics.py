"""The metric table: names, units, fallbacks, the --query-metrics check."""

from __future__ import annotations

import pytest

from pytest_kforge.profile.metrics import (CONTRACT_SHORT_NAMES, METRICS, check_metrics, ncu_metric_names,
                                           parse_number, parse_query_metrics, resolve, to_unit)


def test_contract_short_names_are_the_briefs() -> None:
    assert CONTRACT_SHORT_NAMES == ("duration_us", "dram_pct", "sm_pct", "tensor_pct", "achieved_occupancy_pct",
                                    "theoretical_occupancy_pct", "registers_per_thread", "shared_mem_per_block_kb",
                                    "local_spill_bytes", "l2_hit_pct", "dram_read_mb", "dram_write_mb")


def test_hopper_tensor_counter_comes_first() -> None:
    # gmma_cycles reads n/a on the H200; hmma_cycles reports wgmma activity (shared/gpu/README.md)
    first = METRICS["tensor_pct"].candidates[0][0]
    assert first.startswith("sm__pipe_tensor_op_hmma_cycles_active")


def test_metric_names_are_unique_and_bounded() -> None:
    names = ncu_metric_names()
    assert len(names) == len(set(names)) and len(names) <= 25


@pytest.mark.parametrize("value, unit, target, want", [
    (92345.0, "nsecond", "us", 92.345), (1.5, "msecond", "us", 1500.0), (3.0, "usecond", "us", 3.0),
    (196608.0, "byte/block", "KB", 192.0), (158e6, "byte", "MB", 158.0), (2.0, "Mbyte", "MB", 2.0),
    (71.2, "%", "%", 71.2), (168.0, "register/thread", "count", 168.0),
])
def test_units(value, unit, target, want) -> None:
    assert to_unit(value, unit, target) == pytest.approx(want)


@pytest.mark.parametrize("text, want", [("1,234.5", 1234.5), ("n/a", None), ("", None), ("abc", None), ("7", 7.0)])
def test_parse_number(text, want) -> None:
    assert parse_number(text) == want


def test_resolve_fallback_max_and_sum() -> None:
    raw = {
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": (None, "%"),          # n/a -> fallback
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": (55.0, "%"),
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": (40.0, "%"),
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": (45.0, "%"),
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": (None, "%"),
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": (1000.0, "byte"),
        "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": (24.0, "byte"),
    }
    values, sources = resolve(raw)
    assert values["dram_pct"] == 55.0 and sources["dram_pct"].startswith("dram__throughput")
    assert values["tensor_pct"] == 45.0 and sources["tensor_pct"].startswith("sm__pipe_tensor_cycles_active")
    assert values["local_spill_bytes"] == 1024.0
    assert "duration_us" not in values  # absent metrics are left out, never zero


def test_query_metrics_check_and_filter() -> None:
    listing = "Device NVIDIA H200 (GH100)\n---\nMetric Name   Metric Description\n---\n" + "\n".join(
        f"{n}   some description" for n in ("gpu__time_duration", "sm__throughput", "dram__bytes_read",
                                          "sm__pipe_tensor_op_hmma_cycles_active"))
    avail = parse_query_metrics(listing)
    assert avail == {"gpu__time_duration", "sm__throughput", "dram__bytes_read", "sm__pipe_tensor_op_hmma_cycles_active"}
    rows = {r[0]: r[1] for r in check_metrics(avail)}
    assert rows["duration_us"] == "ok" and rows["dram_pct"] == "missing" and rows["registers_per_thread"] == "attribute"
    names = ncu_metric_names(available=avail)
    assert "gpu__time_duration.sum" in names and "launch__registers_per_thread" in names
    # tensor_pct: only hmma is listed, so the unlisted fallbacks are dropped
    assert not any(n.startswith(("sm__pipe_tensor_cycles_active", "sm__inst_executed_pipe_tensor_op_gmma")) for n in names)


def test_a_short_name_never_loses_all_its_counters() -> None:
    names = ncu_metric_names(available={"unrelated__thing"})
    assert "gpu__time_duration.sum" in names  # unlisted, but the only candidate: kept
    assert "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed" in names  # first candidate kept
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" not in names
