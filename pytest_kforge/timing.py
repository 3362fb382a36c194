"""Timing a kernel the way a GPU engineer would accept, and the checks that keep it honest.

On CUDA (:class:`CudaClock`) every round is::

    synchronize; host t0                              -> the device is idle
    flush L2 (write a buffer of 2x the L2 size)       -> no round reads a warm cache
    spin kernel (torch.cuda._sleep) sized to 2x the host launch time, so host launch overhead stays off the device
    timeline; host_us is reported separately
    start event; launch(); end event                  -> device time = start.elapsed_time(end)
    end.synchronize()                                 -> the timed stream is done
    torch.cuda.synchronize(); host t1                 -> "residual": time other streams still needed

The flush and the spin are enqueued *before* the start event with no synchronize in between,
so the device is busy while the host issues the version's launches (nvbench's "blocking
kernel"): Python launch overhead stays off the device timeline, as in serving, where decode
steps are replayed from CUDA graphs.  The host time spent issuing ``launch()`` is recorded per round
(``host_s``) and reported beside the device time, so a version whose host side dominates is
visible rather than hidden.

after ``warmup`` untimed launches.  The figure reported is the median of ``rounds`` device times;
the spread is the inter-quartile range as a percentage of the median.

What is checked (see :func:`side_stream_problem` and :func:`floor_problem`):

* the kernel's work must be on the current stream: if, after the end event completed, a
  device-wide synchronize still waits (the "residual"), or if the device time is far below the
  synchronised wall time minus the launch overhead of an empty round, the work ran elsewhere
  (a side stream not joined back) and the time is rejected.  torch.cuda.current_stream() is
  queried after each round and must have no pending work.
* the stream audit (:func:`stream_audit`, once per trial, CUDA only): one extra launch under
  ``torch.profiler`` between two marker kernels on the current stream; any kernel, memcpy or memset
  on another stream that is not inside the window between the markers (fork-join) is rejected.
  This catches side-stream work that does not wait for the current stream and is small enough to
  hide behind the flush + spin before the start event, where neither the events nor the wall clock
  can see it.
* no time below the roofline floor (``spec.floor_s``) minus a 10% margin is reported: such a
  figure is a measurement error (or a kernel skipping work), never a win.

On CPU (:class:`CpuClock`, only with ``--kforge-device cpu``, used by the harness's own tests)
``perf_counter`` around the call stands in for the device clock; it is labelled "host time, NOT
device timing" everywhere it appears.  Its "other streams" are threads the call left running,
so the side-stream check is testable without a GPU.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .errors import KforgeError
from .gpuclock import (
    DEFAULT_GUARD_PCT, POLL_MIN_S, ClockGuard, clock_fields, guard_for, merge_samples, reader_for, sample_while,
)
from .streamaudit import _audit_events, _device_events, _markers, stream_audit  # noqa: F401 - re-exported

__all__ = ["TimingResult", "MeasurementError", "CudaClock", "CpuClock", "make_clock", "time_launch", "back_to_back",
           "side_stream_problem", "stream_audit", "floor_problem", "summarize", "FLOOR_MARGIN"]

FLOOR_MARGIN = 0.10
CPU_LABEL = "cpu perf_counter (host time, NOT device timing)"
CUDA_LABEL = "cuda events (device timeline)"


class MeasurementError(KforgeError):
    """A timing that cannot be trusted (below the roofline floor, work off the timed stream)."""


def summarize(samples: Sequence[float]) -> tuple[float, float, float, float]:
    """``(median, min, iqr, spread_pct)`` of ``samples`` (seconds)."""
    if not samples:
        raise ValueError("no samples")
    med = statistics.median(samples)
    if len(samples) >= 4:
        q = statistics.quantiles(samples, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = max(samples) - min(samples)
    return med, min(samples), iqr, (100.0 * iqr / med if med > 0 else 0.0)


@dataclasses.dataclass
class TimingResult:
    """Per-round samples (seconds) and what produced them."""

    samples_s: list[float]
    wall_s: list[float]
    residual_s: list[float]
    overhead_s: float
    clock: str
    flush: str
    warmup: int
    #: host seconds spent inside ``launch()`` per round (issuing the work, not running it)
    host_s: list[float] = dataclasses.field(default_factory=list)
    #: SM clock (MHz) and NVML clock-event reason mask per round, read while the round ran (CUDA + NVML only)
    clock_mhz: list[int] = dataclasses.field(default_factory=list)
    clock_reasons: list[int] = dataclasses.field(default_factory=list)
    #: rounds thrown away and taken again because the GPU was throttled (:class:`~.gpuclock.ClockGuard`)
    retaken: int = 0
    #: the guard that decided it (None: off, CPU, no NVML)
    guard: ClockGuard | None = None

    def clock_fields(self) -> dict[str, Any]:
        """The clock fields of a result row (:func:`~.gpuclock.clock_fields`; empty without readings)."""
        return clock_fields(self.clock_mhz, self.clock_reasons, self.retaken, self.guard)

    @property
    def rounds(self) -> int:
        return len(self.samples_s)

    @property
    def median_s(self) -> float:
        return summarize(self.samples_s)[0]

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def iqr_s(self) -> float:
        return summarize(self.samples_s)[2]

    @property
    def spread_pct(self) -> float:
        return summarize(self.samples_s)[3]


class CudaClock:
    """CUDA-event timing on the current stream, with an L2 flush before every round."""

    label = CUDA_LABEL

    def __init__(self, flush_bytes: int | None = None, device: str = "cuda",
                 guard_pct: float | None = None) -> None:
        import torch

        from .gpuinfo import l2_cache_bytes

        self._torch = torch
        nbytes = flush_bytes if flush_bytes is not None else 2 * l2_cache_bytes()
        self._flush_buf = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
        self.flush_label = f"L2 flush: {nbytes / 2**20:.0f} MiB written before each round"
        #: GPU spin before the start event, in cycles; adapted to 2x the last round's host launch time
        self._spin_cycles: int = 400_000  # ~200 us at 1.98 GHz
        self._clock_reader = reader_for(device)
        #: ``(sm_mhz, reason_mask)`` of the last round (lowest clock, all reasons), None without NVML
        self.last_sample: tuple[int, int] | None = None
        #: device time of the last round: decides whether the next one polls the clock all through
        self._last_device_s = 0.0
        self.guard = guard_for(self._clock_reader, DEFAULT_GUARD_PCT if guard_pct is None else guard_pct)

    def flush(self) -> None:
        self._flush_buf.fill_(1)

    def round(self, launch: Callable[[], Any], flush: bool = False,
              remember: bool = True) -> tuple[float, float, float, float]:
        """``(device_s, wall_s, residual_s, host_s)`` of one launch (flushing L2 first if asked).

        ``remember``: this round's device time decides whether the next round polls the clock
        (``POLL_MIN_S``); empty overhead rounds pass False so they do not switch the poll off.
        """
        torch = self._torch
        pre, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        pre.record()
        if flush:
            self.flush()  # enqueued, not waited for
        # blocking spin ("blocking kernel", as in nvbench): the device stays busy while the host
        # issues launch(), so Python launch overhead does not leak into the device time
        torch.cuda._sleep(self._spin_cycles)
        start.record()
        h0 = time.perf_counter()
        launch()
        h1 = time.perf_counter()
        end.record()
        host_s = h1 - h0
        self._spin_cycles = int(min(4e6, max(2e5, 2.0 * host_s * 2.0e9)))
        reader = self._clock_reader
        if reader is not None and self._last_device_s >= POLL_MIN_S:
            # a long kernel: sample until the end event completes -- a power-capped board drops its
            # clock under the kernel and recovers right after it (run 9), so the readings at enqueue
            # (the device still in the spin) and after the end both miss it
            self.last_sample = sample_while(reader, lambda: not end.query())
            end.synchronize()
        elif reader is not None:
            during = reader.sample()
            end.synchronize()
            self.last_sample = merge_samples([during, reader.sample()])
        else:
            end.synchronize()
        t_end = time.perf_counter()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if not torch.cuda.current_stream().query():  # pragma: no cover - needs a GPU
            raise MeasurementError("the current CUDA stream still has pending work after synchronize")
        # the wall time compared with the device time leaves out the flush + spin (device-measured)
        lead_s = pre.elapsed_time(start) / 1e3
        device_s = start.elapsed_time(end) / 1e3
        if remember:
            self._last_device_s = device_s
        return device_s, max(t1 - t0 - lead_s, 0.0), t1 - t_end, host_s


class CpuClock:
    """Host ``perf_counter`` timing for CPU runs (tests); NOT device timing."""

    label = CPU_LABEL
    flush_label = "no cache flush (cpu)"
    #: no clock readings and no throttle guard on the host clock (the CUDA clock's two attributes)
    guard: ClockGuard | None = None
    last_sample: tuple[int, int] | None = None

    def flush(self) -> None:
        pass

    def round(self, launch: Callable[[], Any], flush: bool = False,
              remember: bool = True) -> tuple[float, float, float, float]:
        before = set(threading.enumerate())
        t0 = time.perf_counter()
        launch()
        t_end = time.perf_counter()
        # threads the call left running are this clock's "other streams": wait for them
        for th in set(threading.enumerate()) - before:
            th.join(timeout=30)
        t1 = time.perf_counter()
        return t_end - t0, t1 - t0, t1 - t_end, t_end - t0


def make_clock(device: str, guard_pct: float | None = None) -> CudaClock | CpuClock:
    """The clock for ``device``; ``guard_pct`` sets the CUDA clock's throttle guard (None: default, 0: off)."""
    return CudaClock(device=str(device), guard_pct=guard_pct) if str(device).startswith("cuda") else CpuClock()


def time_launch(launch: Callable[[], Any], *, clock: CudaClock | CpuClock, rounds: int, warmup: int) -> TimingResult:
    """Warm up, measure the overhead of an empty round, then time ``rounds`` launches."""
    for _ in range(warmup - 1):
        launch()
    if warmup > 0:
        clock.round(launch, flush=True)  # the last warm-up through the clock: it learns the kernel's length
    clock.round(lambda: None, flush=True, remember=False)
    # an empty round includes the flush, so the wall-vs-device check compares like with like
    overhead = statistics.median(clock.round(lambda: None, flush=True, remember=False)[1] for _ in range(5))
    samples: list[float] = []
    walls: list[float] = []
    residuals: list[float] = []
    hosts: list[float] = []
    mhz: list[int] = []
    reasons: list[int] = []
    guard = clock.guard
    retaken = 0
    while len(samples) < rounds:
        dev, wall, residual, host = clock.round(launch, flush=True)
        sample = clock.last_sample
        if guard is not None and retaken < rounds and guard.throttled(sample):
            retaken += 1  # throttled: let the GPU's power average fall, then take the round again
            time.sleep(guard.pause_s)
            continue
        samples.append(dev)
        walls.append(wall)
        residuals.append(residual)
        hosts.append(host)
        if sample is not None:
            mhz.append(sample[0])
            reasons.append(sample[1])
    return TimingResult(samples, walls, residuals, overhead, clock.label, clock.flush_label, warmup, hosts,
                        mhz, reasons, retaken, guard)


def back_to_back(launch: Callable[[], Any], *, clock: CudaClock | CpuClock, calls: int = 20,
                 host_s: list[float] | None = None) -> list[float]:
    """Event time of each of ``calls`` launches issued back to back, each after an L2 flush, with no spin.

    What a caller launching in a loop sees: when the host needs longer to issue ``launch()`` than the
    device needs for the flush and the previous call, the device waits and the wait lands inside the
    figure (the timed rounds hide it behind the spin).  The trial rows report its median beside the
    device time (``b2b_us``): a public call that is host-bound shows it there.

    ``host_s``: gets the host time of each ``launch()`` of the loop, the steady-state cost a serving loop pays per
    call (the timed rounds' ``host_s`` is one call after a synchronize and a spin: caches and branch history
    cold, run 32 read 19-27 us there against ~11 us issued back to back).
    """
    if isinstance(clock, CpuClock):
        out = []
        for _ in range(calls):
            t0 = time.perf_counter()
            out.append(clock.round(launch)[0])
            if host_s is not None:
                host_s.append(time.perf_counter() - t0)
        return out
    torch = clock._torch
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    torch.cuda.synchronize()
    for start, end in events:
        clock.flush()
        start.record()
        t0 = time.perf_counter()
        launch()
        t1 = time.perf_counter()
        end.record()
        if host_s is not None:
            host_s.append(t1 - t0)
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in events]


def median_device_us(launch: Callable[[], Any], *, device: str = "cuda", rounds: int = 30, warmup: int = 3) -> float:
    """Median time of ``launch`` in microseconds with the harness's clock (flush + spin + events).

    For engineers' scripts (self-checks, sweeps) that want the suite's numbers without the suite:
    a bare ``start.record(); launch(); end.record()`` after a flush lets the device idle while the
    host issues the launch, so host launch time lands inside the measurement.
    """
    return time_launch(launch, clock=make_clock(device), rounds=rounds, warmup=warmup).median_s * 1e6


def side_stream_problem(res: TimingResult, *, min_gap_s: float = 50e-6) -> str | None:
    """Why the timing looks like work ran off the timed stream, or None.

    Flags when the median residual wait after the end event, or the median gap between the
    synchronised wall time (minus an empty round's overhead) and the device time, exceeds both
    ``min_gap_s`` and the device time itself.
    """
    dev = statistics.median(res.samples_s)
    wall = statistics.median(res.wall_s)
    residual = statistics.median(res.residual_s)
    gap = wall - res.overhead_s - dev
    limit = max(min_gap_s, dev)
    if residual > limit or gap > limit:
        return (f"timed {dev * 1e6:.1f} us, but a synchronised round took {wall * 1e6:.1f} us "
                f"(empty-round overhead {res.overhead_s * 1e6:.1f} us, {residual * 1e6:.1f} us still pending "
                f"after the timed stream finished): the work ran outside the timed stream (a side stream "
                f"or thread not joined back); launch everything on the current stream")
    return None


def floor_problem(median_s: float, floor_s: float, *, margin: float = FLOOR_MARGIN) -> str | None:
    """Why ``median_s`` cannot be real (below the roofline floor minus ``margin``), or None."""
    if floor_s > 0 and median_s < floor_s * (1.0 - margin):
        return (f"measured {median_s * 1e6:.2f} us is below the roofline floor of {floor_s * 1e6:.2f} us "
                f"(minus {margin:.0%}): a measurement error or skipped work, not a result; "
                f"check the timing and that the kernel reads all its inputs")
    return None
