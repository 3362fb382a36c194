"""SM clock fields of a trial row (NVML readings), without a GPU."""

from __future__ import annotations

import time

import pytest

from pytest_kforge import gpuclock
from pytest_kforge.gpuclock import CLOCK_NOTE_PCT, clock_fields, reason_names
from pytest_kforge.timing import CpuClock, time_launch


def test_reason_names_leave_idle_out_unless_asked() -> None:
    assert reason_names(0x1 | 0x4) == ["sw_power_cap"]
    assert reason_names(0x1 | 0x4, idle=True) == ["gpu_idle", "sw_power_cap"]
    assert reason_names(0x20 | 0x80) == ["sw_thermal_slowdown", "hw_power_brake_slowdown"]
    assert reason_names(0x10000) == ["0x10000"]  # a bit this version does not know is still shown
    assert reason_names(0) == []


def test_steady_clock_has_no_note() -> None:
    out = clock_fields([1980] * 9 + [1965], [0x1] * 10)
    assert out["sm_clock_mhz"] == {"min": 1965, "median": 1980, "max": 1980}
    assert out["clock_events"] == [] and "clock_note" not in out


def test_clock_step_is_named_with_its_reason() -> None:
    # the shape seen on the H200: half the rounds at full clock, then a step down under the power cap
    out = clock_fields([1980] * 50 + [1830] * 50, [0] * 50 + [0x4] * 50)
    assert out["sm_clock_mhz"]["min"] == 1830 and out["sm_clock_mhz"]["max"] == 1980
    assert out["clock_events"] == ["sw_power_cap"]
    moved = 100 * 150 / 1980
    assert moved > CLOCK_NOTE_PCT
    assert "1830-1980 MHz" in out["clock_note"] and f"{moved:.1f}%" in out["clock_note"]
    assert "sw_power_cap" in out["clock_note"]


def test_no_readings_no_fields() -> None:
    assert clock_fields([], []) == {}
    assert clock_fields([0, 0], [0, 0]) == {}  # NVML refused every read


def test_time_launch_collects_one_sample_per_round() -> None:
    class SampledClock(CpuClock):
        def __init__(self) -> None:
            self.n = 0
            self.last_sample: tuple[int, int] | None = None

        def round(self, launch, flush=False, remember=True):  # type: ignore[no-untyped-def]
            out = super().round(launch, flush, remember)
            self.n += 1
            self.last_sample = (1900 + self.n, 0x4 if self.n % 2 else 0)
            return out

    res = time_launch(lambda: time.sleep(0.0005), clock=SampledClock(), rounds=4, warmup=1)
    # the warm-up goes through the clock (it learns the kernel's length), then 1 + 5 empty rounds
    # measure the overhead; the 4 timed rounds come after them
    assert res.clock_mhz == [1908, 1909, 1910, 1911]
    assert res.clock_reasons == [0, 0x4, 0, 0x4]


def test_cpu_clock_has_no_clock_samples() -> None:
    res = time_launch(lambda: None, clock=CpuClock(), rounds=3, warmup=0)
    assert res.clock_mhz == [] and res.clock_reasons == []


def test_reader_is_none_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    gpuclock._nvml.cache_clear()

    def no_lib(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(gpuclock.ctypes, "CDLL", no_lib)
    try:
        assert gpuclock.reader_for("cuda") is None
    finally:
        gpuclock._nvml.cache_clear()


def test_guard_takes_again_only_throttled_slow_rounds() -> None:
    g = gpuclock.ClockGuard(min_mhz=1960, max_mhz=1980, pct=99.0)
    assert g.throttled((1830, 0x4))            # power cap, 92% of max: re-take
    assert not g.throttled((1965, 0x4))        # capped but within 1%: keep
    assert not g.throttled((1830, 0x1))        # slow because idle, not throttled: keep
    assert not g.throttled((1830, 0x2))        # a clock someone set on purpose: keep
    assert g.throttled((1500, 0x40))           # hardware thermal slowdown
    assert not g.throttled((0, 0x4)) and not g.throttled(None)  # nothing read
    assert "1960 MHz (99% of 1980)" in g.describe()


def test_guard_for_needs_a_reader_a_maximum_and_a_percentage() -> None:
    class Reader:
        def __init__(self, top: int) -> None:
            self.top = top

        def max_mhz(self) -> int:
            return self.top

    assert gpuclock.guard_for(None, 99) is None
    assert gpuclock.guard_for(Reader(1980), 0) is None  # type: ignore[arg-type]
    assert gpuclock.guard_for(Reader(0), 99) is None  # type: ignore[arg-type]
    g = gpuclock.guard_for(Reader(1980), 99)  # type: ignore[arg-type]
    assert g is not None and g.min_mhz == 1960 and g.max_mhz == 1980


def test_time_launch_retakes_throttled_rounds_and_counts_them() -> None:
    class ThrottlingClock(CpuClock):
        """Every third round is throttled (power cap at 1830 MHz)."""

        def __init__(self) -> None:
            self.n = 0
            self.guard = gpuclock.ClockGuard(min_mhz=1960, max_mhz=1980, pct=99.0, pause_s=0.0)
            self.last_sample: tuple[int, int] | None = None

        def round(self, launch, flush=False, remember=True):  # type: ignore[no-untyped-def]
            out = super().round(launch, flush, remember)
            self.n += 1
            self.last_sample = (1830, 0x4) if self.n % 3 == 0 else (1980, 0)
            return out

    clock = ThrottlingClock()
    res = time_launch(lambda: None, clock=clock, rounds=10, warmup=0)
    assert res.rounds == 10 and res.retaken > 0
    assert all(m == 1980 for m in res.clock_mhz)  # only unthrottled rounds kept
    fields = clock_fields(res.clock_mhz, res.clock_reasons, res.retaken, clock.guard)
    assert fields["clock_retaken"] == res.retaken
    assert f"{res.retaken} rounds were re-taken after a pause (10 kept)" in fields["clock_note"]
    assert "below 1960 MHz" in fields["clock_note"] and "gave up" not in fields["clock_note"]


def test_guard_gives_up_after_as_many_retakes_as_rounds() -> None:
    class AlwaysThrottled(CpuClock):
        guard = gpuclock.ClockGuard(min_mhz=1960, max_mhz=1980, pct=99.0, pause_s=0.0)
        last_sample = (1830, 0x4)

    clock = AlwaysThrottled()
    res = time_launch(lambda: None, clock=clock, rounds=4, warmup=0)
    assert res.rounds == 4 and res.retaken == 4  # bounded: a GPU that never recovers still finishes
    note = clock_fields(res.clock_mhz, res.clock_reasons, res.retaken, clock.guard)["clock_note"]
    assert "the guard gave up after 4 re-takes: 4 kept rounds ran throttled below 1960 MHz" in note


class _FakeNvml:
    """NVML stand-in: UUID lookup fails, ``count`` GPUs, max clock 1980."""

    def __init__(self, count: int) -> None:
        self.count = count

    def nvmlDeviceGetHandleByUUID(self, uuid, handle):  # noqa: N802, ANN001, ANN201 - NVML's names
        return 13  # NVML_ERROR_NOT_FOUND

    def nvmlDeviceGetCount_v2(self, out):  # noqa: N802, ANN001, ANN201
        out._obj.value = self.count
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle):  # noqa: N802, ANN001, ANN201
        return 0


@pytest.mark.parametrize(("count", "found"), [(1, True), (2, False), (8, False)])
def test_index_fallback_only_on_a_single_gpu_machine(monkeypatch: pytest.MonkeyPatch, count: int, found: bool) -> None:
    # with several GPUs and no UUID match, index 0 may be another GPU than torch's: no reader at all
    monkeypatch.setattr(gpuclock, "_nvml", lambda: _FakeNvml(count))
    monkeypatch.setattr(gpuclock, "_torch_uuid", lambda device: "GPU-00000000-0000-0000-0000-000000000000")
    assert (gpuclock.reader_for("cuda:0") is not None) is found


class _ScriptedReader:
    """NVML stand-in: returns the scripted samples in order, then the last one forever."""

    def __init__(self, samples):
        self.samples, self.calls = list(samples), 0

    def sample(self):
        self.calls += 1
        return self.samples[min(self.calls - 1, len(self.samples) - 1)]


def test_merge_samples_takes_the_lowest_clock_and_every_reason() -> None:
    from pytest_kforge.gpuclock import merge_samples

    assert merge_samples([(1980, 0x1), (1845, 0x4), (0, 0x80), (1965, 0)]) == (1845, 0x85)
    assert merge_samples([(0, 0), (0, 0x4)]) == (0, 0x4)  # NVML gave no clock: 0, reasons kept


def test_sample_while_catches_a_dip_inside_the_round_that_its_ends_miss() -> None:
    """Run 9's heated board: full clock at enqueue and after the end, throttled in between."""
    from pytest_kforge.gpuclock import sample_while

    reader = _ScriptedReader([(1965, 0), (1860, 0x4), (1830, 0x4), (1965, 0)])
    polls = iter([True, True, False])
    assert sample_while(reader, lambda: next(polls), period_s=0) == (1830, 0x4)
    assert reader.calls == 4  # before, two while busy, after
    done = _ScriptedReader([(1980, 0), (1980, 0)])
    assert sample_while(done, lambda: False, period_s=0) == (1980, 0) and done.calls == 2
    stuck = _ScriptedReader([(1980, 0)])
    assert sample_while(stuck, lambda: True, period_s=0, max_samples=5) == (1980, 0) and stuck.calls == 6
