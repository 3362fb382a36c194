"""Timing statistics, the CPU clock, and the floor / side-stream checks (no GPU needed)."""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from pytest_kforge.timing import (CPU_LABEL, CpuClock, TimingResult, _audit_events, _device_events, _markers,
                                  floor_problem, side_stream_problem, stream_audit, summarize, time_launch)


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


# --- stream audit: pure logic on fake (stream, start_ns, end_ns, name) tuples ---------------------

SPIN = "void at::cuda::(anonymous namespace)::spin_kernel(long)"
START = (7, 0, 100_000, SPIN)          # timed stream 7, start marker runs 0 .. 100 us
END = (7, 300_000, 301_000, SPIN)      # end marker at 300 us


@pytest.mark.parametrize(("events", "flagged"), [
    ([(7, 100_500, 290_000, "mul")], False),                            # on the timed stream
    ([(13, 110_000, 200_000, "mul"), (7, 200_500, 290_000, "add")], False),  # fork-join inside the window
    ([(13, 5_000, 9_000, "mul"), (7, 100_500, 290_000, "add")], True),  # hidden behind the start marker
    ([(13, 90_000, 150_000, "mul")], True),                             # starts before the window opens
    ([(13, 250_000, 350_000, "mul")], True),                            # still running at the end marker
    ([(13, 400_000, 401_000, "memset")], True),                         # after the end marker
])
def test_audit_window_rule(events: list, flagged: bool) -> None:
    msg = _audit_events([START, *events, END], START, END)
    assert (msg is not None) is flagged
    if flagged:
        assert msg is not None and "ran outside the timed stream" in msg and "on stream 13" in msg


def test_audit_counts_violations_per_stream() -> None:
    events = [START, (13, 1_000, 2_000, "a"), (13, 3_000, 4_000, "b"), (21, 500_000, 501_000, "c"),
              (21, 150_000, 160_000, "joined"), END]
    msg = _audit_events(events, START, END)
    assert msg is not None and "2 kernels on stream 13" in msg and "1 kernel on stream 21" in msg


def test_markers_are_the_first_and_last_spin_on_the_timed_stream() -> None:
    inner = (7, 150_000, 160_000, SPIN)  # a version may sleep too: the last spin is the end marker
    other = (13, 2_000, 3_000, SPIN)     # a spin on a side stream is not a marker
    assert _markers([inner, END, other, START, (13, 1, 2, "mul")]) == (START, END)
    assert "no spin_kernel marker" in str(_markers([(7, 0, 1, "mul")]))
    assert "end marker" in str(_markers([START]))


class _FakeKinetoEvent:
    def __init__(self, device: str, kind: str, stream: int, start: int, end: int, name: str) -> None:
        self._d, self._k, self._s, self._t0, self._t1, self._n = device, kind, stream, start, end, name

    def device_type(self) -> object:
        from torch.autograd import DeviceType

        return DeviceType.CUDA if self._d == "cuda" else DeviceType.CPU

    def activity_type(self) -> str:
        return self._k

    def device_resource_id(self) -> int:
        return self._s

    def start_ns(self) -> int:
        return self._t0

    def end_ns(self) -> int:
        return self._t1

    def name(self) -> str:
        return self._n


def test_device_events_keep_only_device_work() -> None:
    class Prof:
        class profiler:  # noqa: N801 - mirrors torch.profiler.profile().profiler.kineto_results
            class kineto_results:  # noqa: N801
                @staticmethod
                def events() -> list[_FakeKinetoEvent]:
                    return [_FakeKinetoEvent("cpu", "cpu_op", 1, 0, 5, "aten::mul"),
                            _FakeKinetoEvent("cuda", "kernel", 7, 10, 20, SPIN),
                            _FakeKinetoEvent("cuda", "gpu_memcpy", 13, 30, 40, "Memcpy DtoD"),
                            _FakeKinetoEvent("cuda", "gpu_user_annotation", 13, 0, 99, "range"),
                            _FakeKinetoEvent("cuda", "gpu_memset", 7, 50, 60, "Memset")]

    assert _device_events(Prof()) == [(7, 10, 20, SPIN), (13, 30, 40, "Memcpy DtoD"), (7, 50, 60, "Memset")]
    assert "no kineto_results" in str(_device_events(object()))


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU path of the audit")
def test_stream_audit_skips_without_cuda() -> None:
    calls: list[int] = []
    notes: list[str] = []
    assert stream_audit(lambda: calls.append(1), notes=notes) is None
    assert calls == [] and notes == []


class _FakeProfile:
    """Stands in for torch.profiler.profile: replays a fixed trace, or fails to start."""

    trace: list[_FakeKinetoEvent] = []
    start_error: Exception | None = None

    def __init__(self, activities: object = None) -> None:
        self.profiler = self  # .profiler.kineto_results.events(), as in torch
        self.kineto_results = self

    def events(self) -> list[_FakeKinetoEvent]:
        return list(self.trace)

    def __enter__(self) -> _FakeProfile:
        if self.start_error is not None:
            raise self.start_error
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture()
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """The CUDA calls of :func:`stream_audit` replaced by recorders, so its control flow runs on CPU."""
    import torch
    import torch.profiler

    log: dict[str, list] = {"sleep": [], "query": [True]}

    class Event:
        def record(self) -> None:
            pass

        def query(self) -> bool:  # True = the start marker already finished when launch() returned
            return log["query"].pop(0) if len(log["query"]) > 1 else log["query"][0]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log["sleep"].append(cycles))
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile)
    monkeypatch.setattr(_FakeProfile, "start_error", None)
    return log


def _trace(*events: tuple[int, int, int, str]) -> list[_FakeKinetoEvent]:
    return [_FakeKinetoEvent("cuda", "kernel", *e) for e in events]


def test_stream_audit_flow_flags_hidden_side_kernel(fake_cuda: dict[str, list],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    hidden = _trace(START, (13, 5_000, 9_000, "mul"), (7, 100_500, 290_000, "add"), END)
    monkeypatch.setattr(_FakeProfile, "trace", hidden)
    fake_cuda["query"] = [True, False]  # first try: the marker ended before launch() returned -> longer marker
    calls: list[int] = []
    notes: list[str] = []
    msg = stream_audit(lambda: calls.append(1), notes=notes)
    assert msg is not None and "ran outside the timed stream" in msg and "1 kernel on stream 13" in msg
    assert calls == [1, 1] and fake_cuda["sleep"] == [200_000, 1_000, 800_000, 1_000] and notes == []


def test_stream_audit_flow_passes_fork_join(fake_cuda: dict[str, list], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_FakeProfile, "trace", _trace(START, (13, 110_000, 200_000, "mul"), END))
    fake_cuda["query"] = [False]
    notes: list[str] = []
    assert stream_audit(lambda: None, notes=notes) is None and notes == []


@pytest.mark.parametrize(("trace", "start_error", "reason"), [
    ([], RuntimeError("profiler already enabled"), "the profiler did not start (RuntimeError"),
    ([], None, "no spin_kernel marker"),  # e.g. CUPTI recorded nothing
])
def test_stream_audit_unavailable_is_a_note_not_a_failure(fake_cuda: dict[str, list], monkeypatch: pytest.MonkeyPatch,
                                                          trace: list, start_error: Exception | None,
                                                          reason: str) -> None:
    monkeypatch.setattr(_FakeProfile, "trace", trace)
    monkeypatch.setattr(_FakeProfile, "start_error", start_error)
    fake_cuda["query"] = [False]
    notes: list[str] = []
    assert stream_audit(lambda: None, notes=notes) is None
    assert len(notes) == 1 and notes[0].startswith("stream audit unavailable: ") and reason in notes[0], notes


def test_stream_audit_notes_a_launch_longer_than_every_marker(fake_cuda: dict[str, list],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_FakeProfile, "trace", _trace(START, END))
    fake_cuda["query"] = [True]  # the marker never outlasts launch()
    notes: list[str] = []
    assert stream_audit(lambda: None, notes=notes) is None
    assert len(fake_cuda["sleep"]) == 8 and notes and notes[0].startswith("stream audit partial")


def test_median_device_us_uses_the_harness_clock_on_cpu() -> None:
    """The scripts' helper times with the same clock as the suite (here the CPU clock)."""
    import time

    from pytest_kforge.timing import median_device_us

    calls = []

    def launch() -> None:
        calls.append(1)
        time.sleep(0.002)

    us = median_device_us(launch, device="cpu", rounds=5, warmup=2)
    assert len(calls) == 7 and 1500 < us < 50_000
