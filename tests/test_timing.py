"""Timing statistics, the CPU clock, and the floor / side-stream checks (no GPU needed)."""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from pytest_kforge.timing import (CPU_LABEL, CpuClock, TimingResult, floor_problem, side_stream_problem, summarize,
                                  time_launch)


def test_summarize_median_iqr_spread() -> None:
    samples = [5.0, 1.0, 3.0, 2.0, 4.0]
    med, lo, iqr, spread = summarize(samples)
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    assert (med, lo, iqr) == (3.0, 1.0, q3 - q1) and spread == pytest.approx(100 * (q3 - q1) / 3.0)
    with pytest.raises(ValueError):
        summarize([])


def test_cpu_clock_measures_the_call_and_is_labelled() -> None:
    calls = []

    def launch() -> None:
        calls.append(1)
        time.sleep(0.002)

    res = time_launch(launch, clock=CpuClock(), rounds=7, warmup=3)
    assert len(calls) == 10 and res.rounds == 7 and res.warmup == 3
    assert res.clock == CPU_LABEL and "NOT device timing" in res.clock
    assert 0.002 <= res.median_s < 0.2 and res.min_s <= res.median_s
    assert side_stream_problem(res) is None


def test_thread_left_running_counts_as_side_stream() -> None:
    def launch() -> None:
        threading.Thread(target=time.sleep, args=(0.05,)).start()

    res = time_launch(launch, clock=CpuClock(), rounds=5, warmup=0)
    assert res.median_s < 0.05 <= statistics.median(res.wall_s)
    msg = side_stream_problem(res)
    assert msg is not None and "ran outside the timed stream" in msg


def _result(dev: float, wall: float, residual: float, overhead: float = 10e-6) -> TimingResult:
    return TimingResult([dev] * 5, [wall] * 5, [residual] * 5, overhead, "test", "none", 0)


@pytest.mark.parametrize(("dev", "wall", "residual", "flagged"), [
    (100e-6, 115e-6, 3e-6, False),    # honest: wall = device + overhead
    (5e-6, 30e-6, 2e-6, False),       # tiny kernel, gap under 50 us: launch noise, not a cheat
    (5e-6, 400e-6, 2e-6, True),       # device time far below the synchronised wall time
    (100e-6, 120e-6, 300e-6, True),   # work still pending after the timed stream finished
])
def test_side_stream_rule(dev: float, wall: float, residual: float, flagged: bool) -> None:
    assert (side_stream_problem(_result(dev, wall, residual)) is not None) is flagged


def test_floor_rejects_impossible_times_only() -> None:
    assert floor_problem(46e-6, 46.2e-6) is None          # within the 10% margin
    assert floor_problem(100e-6, 46.2e-6) is None
    msg = floor_problem(30e-6, 46.2e-6)
    assert msg is not None and "below the roofline floor of 46.20 us" in msg
