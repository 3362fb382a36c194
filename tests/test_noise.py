"""benchmarks.noise without a GPU: the per-load summary and the CPU load's process handling."""

from __future__ import annotations

import time

import pytest

from benchmarks import noise


def test_summary_counts_slow_rounds_against_the_reference() -> None:
    samples = [100.0] * 80 + [103.0] * 20  # a 3% step in a fifth of the rounds
    row = noise.summarize_load(samples, 100.0, [1980] * 100)
    assert row["median_us"] == 100.0 and row["slow_pct"] == pytest.approx(20.0)
    assert row["clock_mhz"] == [1980, 1980] and row["rounds"] == 100
    assert noise.summarize_load([100.0] * 10, 100.0, [])["clock_mhz"] is None


def test_cpu_load_starts_and_stops() -> None:
    procs = noise._start("cpu", 2, "mla", "v0")
    try:
        time.sleep(0.5)
        assert all(p.poll() is None for p in procs)  # still burning
    finally:
        codes = noise._stop(procs)
    assert len(codes) == 2 and all(c is not None for c in codes)
    assert noise._start("none", 3, "mla", "v0") == []


def test_unknown_load_is_named() -> None:
    with pytest.raises(SystemExit, match="unknown"):
        noise.main(["--loads", "none,quiet"])


def test_bad_guard_list_and_rounds_are_named() -> None:
    with pytest.raises(SystemExit, match="give percentages"):
        noise.main(["--loads", "none", "--clock-guard", "high"])
    with pytest.raises(SystemExit, match="give percentages"):
        noise.main(["--loads", "none", "--clock-guard", "0,120"])
    with pytest.raises(SystemExit, match="at least 4"):
        noise.main(["--loads", "none", "--rounds", "2"])
