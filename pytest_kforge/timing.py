"""Timing a kernel the way a GPU engineer would accept, and the checks that keep it honest.

On CUDA (:class:`CudaClock`) every round is::

    synchronize; host t0                              -> the device is idle
    flush L2 (write a buffer of 2x the L2 size)       -> no round reads a warm cache
    spin kernel (torch.cuda._sleep) sized to 2x the host launch time, so host launch overhead stays off the device timeline; host_us is reported separately
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

__all__ = ["TimingResult", "MeasurementError", "CudaClock", "CpuClock", "make_clock", "time_launch",
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

    def __init__(self, flush_bytes: int | None = None, device: str = "cuda") -> None:
        import torch

        from .gpuinfo import l2_cache_bytes

        self._torch = torch
        nbytes = flush_bytes if flush_bytes is not None else 2 * l2_cache_bytes()
        self._flush_buf = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
        self.flush_label = f"L2 flush: {nbytes / 2**20:.0f} MiB written before each round"
        #: GPU spin before the start event, in cycles; adapted to 2x the last round's host launch time
        self._spin_cycles: int = 400_000  # ~200 us at 1.98 GHz

    def flush(self) -> None:
        self._flush_buf.fill_(1)

    def round(self, launch: Callable[[], Any], flush: bool = False) -> tuple[float, float, float, float]:
        """``(device_s, wall_s, residual_s, host_s)`` of one launch (flushing L2 first if asked)."""
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
        end.synchronize()
        t_end = time.perf_counter()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if not torch.cuda.current_stream().query():  # pragma: no cover - needs a GPU
            raise MeasurementError("the current CUDA stream still has pending work after synchronize")
        # the wall time compared with the device time leaves out the flush + spin (device-measured)
        lead_s = pre.elapsed_time(start) / 1e3
        return start.elapsed_time(end) / 1e3, max(t1 - t0 - lead_s, 0.0), t1 - t_end, host_s


class CpuClock:
    """Host ``perf_counter`` timing for CPU runs (tests); NOT device timing."""

    label = CPU_LABEL
    flush_label = "no cache flush (cpu)"

    def flush(self) -> None:
        pass

    def round(self, launch: Callable[[], Any], flush: bool = False) -> tuple[float, float, float, float]:
        before = set(threading.enumerate())
        t0 = time.perf_counter()
        launch()
        t_end = time.perf_counter()
        # threads the call left running are this clock's "other streams": wait for them
        for th in set(threading.enumerate()) - before:
            th.join(timeout=30)
        t1 = time.perf_counter()
        return t_end - t0, t1 - t0, t1 - t_end, t_end - t0


def make_clock(device: str) -> CudaClock | CpuClock:
    return CudaClock(device=str(device)) if str(device).startswith("cuda") else CpuClock()


def time_launch(launch: Callable[[], Any], *, clock: CudaClock | CpuClock, rounds: int, warmup: int) -> TimingResult:
    """Warm up, measure the overhead of an empty round, then time ``rounds`` launches."""
    for _ in range(warmup):
        launch()
    clock.round(lambda: None, flush=True)
    # an empty round includes the flush, so the wall-vs-device check compares like with like
    overhead = statistics.median(clock.round(lambda: None, flush=True)[1] for _ in range(5))
    samples: list[float] = []
    walls: list[float] = []
    residuals: list[float] = []
    hosts: list[float] = []
    for _ in range(rounds):
        dev, wall, residual, host = clock.round(launch, flush=True)
        samples.append(dev)
        walls.append(wall)
        residuals.append(residual)
        hosts.append(host)
    return TimingResult(samples, walls, residuals, overhead, clock.label, clock.flush_label, warmup, hosts)


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


#: kineto activity types kept by the audit (libkineto's names; annotations and syncs are not work)
_AUDITED_ACTIVITIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_MARKER_NAME = "spin_kernel"  # what torch.cuda._sleep launches
_START_MARKER_CYCLES = 200_000  # ~100 us at 2 GHz; grown until it outlasts the host's launch()
_END_MARKER_CYCLES = 1_000

AuditEvent = tuple[int, int, int, str]  # (stream, start_ns, end_ns, name)


def _audit_events(events: Sequence[AuditEvent], start_marker: AuditEvent, end_marker: AuditEvent,
                  *, slack_ns: int = 1_000) -> str | None:
    """Why device ``events`` show work off the timed stream, or None (pure logic of :func:`stream_audit`).

    The timed stream is ``start_marker``'s.  Work on another stream is honest only inside the
    window from the end of ``start_marker`` to the start of ``end_marker`` (a fork-join: the side
    stream waited for the current one and was joined back); anything else ran where the timer
    cannot see it.  ``slack_ns`` absorbs timestamp rounding.
    """
    timed = start_marker[0]
    lo, hi = start_marker[2] - slack_ns, end_marker[1] + slack_ns
    outside: dict[int, int] = {}
    for stream, start_ns, end_ns, _name in events:
        if stream != timed and not (start_ns >= lo and end_ns <= hi):
            outside[stream] = outside.get(stream, 0) + 1
    if not outside:
        return None
    where = ", ".join(f"{n} kernel{'s' if n != 1 else ''} on stream {sid}" for sid, n in sorted(outside.items()))
    return (f"the work ran outside the timed stream (a side stream not joined back): {where} "
            f"outside the timed window (timed stream {timed}); launch everything on the current stream")


def _markers(events: Sequence[AuditEvent]) -> tuple[AuditEvent, AuditEvent] | str:
    """The start and end marker kernels of an audit trace, or why they are not there."""
    spins = sorted((e for e in events if _MARKER_NAME in e[3]), key=lambda e: e[1])
    if not spins:
        return f"no {_MARKER_NAME} marker kernel in the profiler trace ({len(events)} device events)"
    start = spins[0]
    ends = [e for e in spins[1:] if e[0] == start[0]]
    if not ends:
        return "the end marker kernel is missing from the profiler trace"
    return start, ends[-1]


def _device_events(prof: Any) -> list[AuditEvent] | str:
    """``(stream, start_ns, end_ns, name)`` of the kernels/memcpys/memsets in a finished profile."""
    from torch.autograd import DeviceType

    try:
        raw = prof.profiler.kineto_results.events()
    except AttributeError as exc:
        return f"this torch's profiler has no kineto_results.events() ({exc})"
    out: list[AuditEvent] = []
    for e in raw:
        if e.device_type() != DeviceType.CUDA:
            continue
        kind = e.activity_type() if hasattr(e, "activity_type") else None
        if kind is not None and str(kind) not in _AUDITED_ACTIVITIES:
            continue
        out.append((int(e.device_resource_id()), int(e.start_ns()), int(e.end_ns()), str(e.name())))
    return out


def stream_audit(launch: Callable[[], Any], notes: list[str] | None = None) -> str | None:
    """Why one profiled ``launch()`` put work outside the timed stream, or None (CUDA only).

    synchronize; start marker (``torch.cuda._sleep``) on the current stream; ``launch()``; end
    marker; synchronize -- all under ``torch.profiler`` (CUDA activities) -- then
    :func:`_audit_events` on the trace.  The start marker is lengthened until it is still running
    when ``launch()`` returns, so side-stream work that does not wait for the current stream
    always starts before the window opens.  When the audit cannot run (no CUDA, profiler missing
    or busy, no markers in the trace) it returns None and appends ``"stream audit unavailable:
    <reason>"`` to ``notes``.
    """

    def unavailable(reason: str) -> None:
        if notes is not None:
            notes.append(f"stream audit unavailable: {reason}")

    import torch

    if not torch.cuda.is_available():
        return None
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError as exc:  # pragma: no cover - every supported torch has it
        unavailable(f"torch.profiler cannot be imported ({exc})")
        return None
    cycles = _START_MARKER_CYCLES
    for _ in range(4):
        torch.cuda.synchronize()
        prof = profile(activities=[ProfilerActivity.CUDA])
        try:
            prof.__enter__()
        except Exception as exc:  # noqa: BLE001 - e.g. another profiler is already running
            unavailable(f"the profiler did not start ({type(exc).__name__}: {exc})")
            return None
        try:
            torch.cuda._sleep(cycles)
            marker_done = torch.cuda.Event()
            marker_done.record()
            launch()
            covered = not marker_done.query()  # the start marker outlasted the host's launch()
            torch.cuda._sleep(_END_MARKER_CYCLES)
            torch.cuda.synchronize()
        finally:
            prof.__exit__(None, None, None)
        if covered:
            break
        cycles *= 4
    else:
        if notes is not None:
            notes.append(f"stream audit partial: launch() outlasted a {cycles // 4}-cycle start marker on the "
                         "host, so side-stream work issued late in launch() may look joined")
    events = _device_events(prof)
    if isinstance(events, str):
        unavailable(events)
        return None
    markers = _markers(events)
    if isinstance(markers, str):
        unavailable(markers)
        return None
    return _audit_events(events, *markers)


def floor_problem(median_s: float, floor_s: float, *, margin: float = FLOOR_MARGIN) -> str | None:
    """Why ``median_s`` cannot be real (below the roofline floor minus ``margin``), or None."""
    if floor_s > 0 and median_s < floor_s * (1.0 - margin):
        return (f"measured {median_s * 1e6:.2f} us is below the roofline floor of {floor_s * 1e6:.2f} us "
                f"(minus {margin:.0%}): a measurement error or skipped work, not a result; "
                f"check the timing and that the kernel reads all its inputs")
    return None
