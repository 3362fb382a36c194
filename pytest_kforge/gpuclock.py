"""The SM clock a timing ran at, and why the GPU lowered it: NVML read through ctypes.

A kernel's device time scales with its clock, and the H200 moves that clock by itself (power
cap, temperature): a 4% step in the middle of a trial looks exactly like a slower kernel.  So
the CUDA clock samples the SM clock and NVML's "clock event reasons" in every timed round -- once
the launch is enqueued and once after the end event; for kernels of ``POLL_MIN_S`` (0.4 ms) and
longer also every ~0.1 ms in between (:func:`sample_while`) -- the lowest clock and every reason
count, and every trial row carries them::

    sm_clock_mhz   {"min": 1965, "median": 1980, "max": 1980}   # lower reading of each kept round
    clock_events   ["sw_power_cap"]      # reasons seen in any kept round, "gpu_idle" left out
    clock_retaken  7                     # rounds re-taken by the guard (below)
    clock_guard    "rounds throttled below 1960 MHz (99% of 1980) re-taken"   # or "off"
    clock_note     "7 rounds were re-taken after a pause: ..." / "SM clock moved 1830-1980 MHz ..."

**The guard** (:class:`ClockGuard`, ``--kforge-clock-guard PCT``, default 99): a round during
which the GPU reported a throttle reason (power cap, thermal or hardware slowdown) *and* ran below
PCT% of its maximum SM clock is thrown away, the GPU is left idle for ``pause_s`` so its power
average drops, and the round is taken again (at most as many re-takes as rounds; the row counts
them; when that budget runs out the rest are kept and the note says so).  Measured on the H200 (devlog run 8): the 1
ms speculative kernel, timed back to back,
pushes the board to its 700 W limit within ~0.5 s and the SM clock wanders 1830-1980 MHz, so the
same kernel reads 946 or 966 us depending on what ran before it; decode (~300 W) never throttles.
Run 9 showed why the samples must span the round: sampled only at enqueue (the
device still in the flush and spin) and after the end, a heated board read 1965 MHz while its 1 ms
spec kernel ran ~5% slow -- the clock drops under the kernel's power and recovers as soon as it
ends.  With the guard, throttled rounds no longer enter the figure, which makes versions and runs comparable
(rounds slow for another reason -- a clock set below the maximum, an idle dip -- are kept and show
in ``sm_clock_mhz``); it does not claim sustained throughput under the power cap.

NVML is the driver's own library (``libnvidia-ml.so.1``, present wherever the driver is), so no
Python package is needed; where it cannot be loaded (CPU machines, containers without it)
:func:`reader_for` returns None and the rows carry no clock fields.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ClockReader", "ClockGuard", "REASONS", "THROTTLE_BITS", "DEFAULT_GUARD_PCT", "reader_for",
           "guard_for", "reason_names", "clock_fields", "CLOCK_NOTE_PCT", "sample_while",
           "merge_samples", "POLL_MIN_S"]

#: NVML's clock event reason bits (nvml.h, ``nvmlClocksEventReason*``), by the names rows use
REASONS: dict[int, str] = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
#: the reasons that mean "slowed down", as opposed to idle or a clock someone set on purpose
THROTTLE_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
#: a trial whose SM clock moved more than this (max - min over max, %) gets a ``clock_note``
CLOCK_NOTE_PCT = 2.0
#: rounds below this % of the maximum SM clock, with a throttle reason, are re-taken
DEFAULT_GUARD_PCT = 99.0
#: a round whose previous round took at least this long is sampled all through (``sample_while``);
#: shorter ones once at enqueue and once after the end (a poll's last pause would show in their wall time)
POLL_MIN_S = 4e-4
_NVML_CLOCK_SM = 1


def reason_names(mask: int, *, idle: bool = False) -> list[str]:
    """The names of the reason bits set in ``mask`` (``gpu_idle`` only when ``idle``)."""
    names = [name for bit, name in REASONS.items() if mask & bit and (idle or bit != 0x1)]
    rest = mask & ~sum(REASONS)
    return names + ([f"0x{rest:x}"] if rest else [])


@dataclasses.dataclass
class ClockReader:
    """One GPU's NVML handle; :meth:`sample` costs two NVML calls (tens of microseconds)."""

    lib: Any
    handle: ctypes.c_void_p
    _reasons: Any

    def sample(self) -> tuple[int, int]:
        """``(sm_mhz, reason_mask)`` now; ``(0, 0)`` for a value NVML would not give."""
        mhz = ctypes.c_uint(0)
        mask = ctypes.c_ulonglong(0)
        if self.lib.nvmlDeviceGetClockInfo(self.handle, _NVML_CLOCK_SM, ctypes.byref(mhz)) != 0:
            mhz.value = 0
        if self._reasons is None or self._reasons(self.handle, ctypes.byref(mask)) != 0:
            mask.value = 0
        return int(mhz.value), int(mask.value)

    def max_mhz(self) -> int:
        """The GPU's maximum SM clock (its boost clock), 0 when NVML will not say."""
        mhz = ctypes.c_uint(0)
        if self.lib.nvmlDeviceGetMaxClockInfo(self.handle, _NVML_CLOCK_SM, ctypes.byref(mhz)) != 0:
            return 0
        return int(mhz.value)


@dataclasses.dataclass
class ClockGuard:
    """Which rounds to take again: throttled (a reason in :data:`THROTTLE_BITS`) below ``min_mhz``."""

    min_mhz: int
    max_mhz: int
    pct: float
    pause_s: float = 0.1

    def throttled(self, sample: tuple[int, int] | None) -> bool:
        if sample is None:
            return False
        mhz, mask = sample
        return 0 < mhz < self.min_mhz and bool(mask & THROTTLE_BITS)

    def describe(self) -> str:
        return f"rounds throttled below {self.min_mhz} MHz ({self.pct:g}% of {self.max_mhz}) re-taken"


def merge_samples(samples: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """``(lowest SM MHz, OR of reason masks)`` of NVML samples; a clock NVML would not give (0) is left out."""
    clocks = [m for m, _ in samples if m > 0]
    mask = 0
    for _, bits in samples:
        mask |= bits
    return (min(clocks) if clocks else 0, mask)


def sample_while(reader: Any, busy: Callable[[], bool], *, period_s: float = 1e-4,
                 max_samples: int = 20_000) -> tuple[int, int]:
    """:func:`merge_samples` of samples taken until ``busy()`` turns False.

    One sample before the first check and one after the last, so a round that is already done
    still reads twice; in between one every ``period_s`` (an NVML read costs tens of microseconds,
    the pause keeps the poll light).  ``max_samples`` bounds a round that never finishes; the
    caller's own wait takes over then.
    """
    read = [reader.sample()]
    while len(read) < max_samples and busy():
        time.sleep(period_s)
        read.append(reader.sample())
    read.append(reader.sample())
    return merge_samples(read)


def guard_for(reader: ClockReader | None, pct: float) -> ClockGuard | None:
    """The guard at ``pct``% of the reader's maximum clock, or None (off, no NVML, no maximum)."""
    if reader is None or pct <= 0:
        return None
    top = reader.max_mhz()
    return ClockGuard(int(top * pct / 100.0), top, pct) if top > 0 else None


@functools.lru_cache(maxsize=1)
def _nvml() -> Any | None:
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    init = getattr(lib, "nvmlInit_v2", None) or getattr(lib, "nvmlInit", None)
    if init is None or init() != 0:
        return None
    return lib


def _torch_uuid(device: str) -> str | None:
    """``GPU-xxxxxxxx-...`` of the torch device (NVML's name for it), or None."""
    try:
        import torch

        uuid = getattr(torch.cuda.get_device_properties(torch.device(device)), "uuid", None)
    except Exception:  # noqa: BLE001 - no CUDA, an old torch: no clock readings, never an error
        return None
    return None if uuid is None else "GPU-" + str(uuid).removeprefix("GPU-")


def reader_for(device: str = "cuda") -> ClockReader | None:
    """A reader for the GPU behind torch's ``device``, or None (no NVML, no such GPU)."""
    lib = _nvml()
    if lib is None:
        return None
    handle = ctypes.c_void_p()
    uuid = _torch_uuid(device)
    # NVML numbers GPUs without $CUDA_VISIBLE_DEVICES: find ours by UUID; index 0 only when the machine
    # has a single GPU (else another GPU's clock would be read -- better none)
    found = uuid is not None and lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) == 0
    if not found:
        count = ctypes.c_uint(0)
        get_count = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
        if get_count(ctypes.byref(count)) != 0 or count.value != 1:
            return None
        get = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
        if get(0, ctypes.byref(handle)) != 0:
            return None
    reasons = (getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
               or getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    return ClockReader(lib, handle, reasons)


def clock_fields(mhz: Sequence[int], masks: Sequence[int], retaken: int = 0,
                 guard: ClockGuard | None = None) -> dict[str, Any]:
    """The clock fields of a trial row from the kept rounds' samples (empty when nothing was read)."""
    read = [m for m in mhz if m > 0]
    if not read:
        return {}
    lo, hi = min(read), max(read)
    union = 0
    for m in masks:
        union |= m
    events = reason_names(union)
    out: dict[str, Any] = {"sm_clock_mhz": {"min": lo, "median": float(statistics.median(read)), "max": hi},
                           "clock_events": events, "clock_retaken": retaken,
                           "clock_guard": guard.describe() if guard is not None else "off"}
    moved = 100.0 * (hi - lo) / hi
    notes = []
    if retaken:
        where = f"below {guard.min_mhz} MHz" if guard is not None else "throttled"
        notes.append(f"{retaken} rounds were re-taken after a pause ({len(mhz)} kept): the GPU ran {where} "
                     f"under a power or thermal limit")
    if guard is not None:
        slow = [m for m, k in zip(mhz, masks) if guard.throttled((m, k))]
        if slow:
            notes.append(f"the guard gave up after {retaken} re-takes: {len(slow)} kept rounds ran throttled "
                         f"below {guard.min_mhz} MHz")
    if moved > CLOCK_NOTE_PCT:
        why = ", ".join(events) or "no reason reported"
        notes.append(f"SM clock moved {lo}-{hi} MHz ({moved:.1f}%) during the timed rounds ({why}): "
                     f"the spread is the GPU's clock, not the kernel; compare against a run at a steady clock")
    if notes:
        out["clock_note"] = "; ".join(notes)
    return out
