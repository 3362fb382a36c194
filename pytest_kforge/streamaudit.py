"""The stream audit: one profiled launch between two marker kernels, and work found off the timed stream.

Part of the timing checks (:mod:`pytest_kforge.timing` re-exports :func:`stream_audit`): the CUDA
events only see the current stream, so one extra launch per trial runs under ``torch.profiler``
and every kernel, memcpy or memset on another stream outside the marker window is rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["stream_audit", "AuditEvent"]

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
