"""The SM clock a kernel really ran at, counted on the GPU itself: a clock witness.

NVML's SM clock (what :mod:`pytest_kforge.gpuclock` samples) is the clock the driver reports.  The
cycles the SMs count inside a heavy kernel can run slower: on the H200 the timeline probe
(``kernels/mla/tools/cute_trace.py``) counted 1778 MHz of ``%clock`` per global-timer microsecond
inside the speculative MLA kernel while NVML, polled every 0.1 ms during the same rounds, read
1980 MHz (devlog run 10).  A device time converted to cycles with NVML's figure then overstates
the cycles a kernel took, and the clock guard cannot see that slowdown at all.

The witness needs no compiler: ``torch.cuda._sleep(n)`` is a one-thread kernel that spins until
its SM's ``clock64`` advanced by ``n`` cycles.  Launched on a side stream just before a burst of
the kernel under test and timed with CUDA events, ``n`` over its elapsed time is the SM clock
averaged over the burst (every SM of the GPU shares that clock).  It takes one warp and no shared
memory, so it sits beside the kernel's CTAs (or, on a GPU the kernel fills to the brim, delays
one CTA per round -- the witness is a separate measurement, never taken during timed rounds).
The same spin with the GPU otherwise idle gives the reference (``idle_mhz``).

    python -m pytest_kforge.clockwitness --kernel mla --kernel-version v23_cute --trial spec
    python -m pytest_kforge.clockwitness --gemm 8192          # a cuBLAS bf16 GEMM for comparison

A trial row's ``kcycles`` (median device time x witnessed clock) is the kernel's length in SM
cycles: on the H200 two versions whose medians differed by 4% at witnessed clocks 1767 and 1695
MHz came out within 0.3% in cycles (devlog run 10), so it separates a kernel change from a
clock change that NVML did not report.

What it measures is the mean over ``window_ms`` of back-to-back launches without L2 flushes
(the trial's timed rounds flush L2 between launches), so it reads the clock of a sustained
burst, which on a power-capped board sits at or below that of an isolated round.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Witness", "witness", "summary", "spin_mhz", "launches_for", "main"]

#: the burst outlasts the spin by this factor, so the spin never runs past the kernel's last launch
COVER = 1.3
#: never queue more launches than this in one burst (a tiny kernel would otherwise need thousands)
MAX_LAUNCHES = 1000


@dataclasses.dataclass(frozen=True)
class Witness:
    """One burst: the SM clock inside it, the idle reference and what NVML said meanwhile."""

    mhz: float  #: SM clock averaged over the spin, which ran beside the burst
    idle_mhz: float  #: the same spin with nothing else running
    kernel_ms: float  #: one launch of the kernel, timed alone before the burst
    launches: int  #: launches in the burst
    window_ms: float  #: how long the spin ran beside the burst
    covered: bool  #: the burst ended after the spin did (else ``mhz`` mixes in idle time)
    nvml_mhz: tuple[int, ...] = ()  #: NVML's SM clock sampled while the burst ran (empty without NVML)

    @property
    def ratio(self) -> float:
        """``mhz / idle_mhz``: 1.0 means the kernel ran at the idle (boost) clock."""
        return self.mhz / self.idle_mhz if self.idle_mhz else math.nan

    def line(self, name: str) -> str:
        nvml = (f"; NVML read {min(self.nvml_mhz)}-{max(self.nvml_mhz)} MHz meanwhile" if self.nvml_mhz
                else "; NVML not available")
        warn = "" if self.covered else (" (WARNING: the burst had gaps or ended before the spin: the figure mixes in "
                                         "idle time)")
        return (f"{name}: {self.kernel_ms * 1e3:.1f} us per launch; SM clock inside a {self.launches}-launch burst "
                f"{self.mhz:.0f} MHz ({self.ratio:.1%} of the idle spin's {self.idle_mhz:.0f} MHz){nvml}{warn}")


def spin_mhz(cycles: int, elapsed_ms: float) -> float:
    """MHz of a spin of ``cycles`` SM cycles that took ``elapsed_ms`` (CUDA-event milliseconds)."""
    if elapsed_ms <= 0:
        raise ValueError(f"a spin of {cycles} cycles cannot take {elapsed_ms} ms")
    return cycles / (elapsed_ms * 1e3)


def launches_for(window_ms: float, kernel_ms: float) -> int:
    """Launches that keep the GPU busy ``COVER`` times past a spin of ``window_ms`` (at least 2)."""
    if kernel_ms <= 0:
        raise ValueError(f"a kernel launch cannot take {kernel_ms} ms")
    return max(2, min(MAX_LAUNCHES, math.ceil(window_ms * COVER / kernel_ms) + 1))


def _idle_spin(torch: Any, cycles: int, repeats: int = 3) -> float:
    """Median MHz of ``repeats`` spins of ``cycles`` with nothing else on the GPU."""
    out = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(cycles)
        b.record()
        b.synchronize()
        out.append(spin_mhz(cycles, a.elapsed_time(b)))
    return statistics.median(out)


def _enqueue(launch: Callable[[], None], n: int) -> float:
    """Enqueue ``n`` launches; the host seconds it took."""
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    return time.perf_counter() - t0


def witness(launch: Callable[[], None], *, window_ms: float = 50.0, reader: Any = None) -> Witness:
    """The SM clock while ``launch`` runs back to back for about ``window_ms`` (see the module doc).

    ``launch`` enqueues one run of the kernel on torch's current stream; ``reader`` is a
    :class:`pytest_kforge.gpuclock.ClockReader` (NVML) or None.  A gate (a spin on the launch
    stream) holds the burst until the host has enqueued all of it, so a kernel shorter than its
    host launch cost still runs back to back; the witness spin starts when the gate opens.
    """
    import torch

    launch()  # compile, allocate, warm
    torch.cuda.synchronize()
    idle_mhz = _idle_spin(torch, int(2e7))  # ~10 ms at boost: the launch latency is ~0.1% of it
    per_s = idle_mhz * 1e6  # gate cycles per second (the gate runs mostly while the GPU is idle)
    host_s = _enqueue(launch, 3) / 3
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int((5 * host_s * 2 + 1e-3) * per_s))
    a.record()
    _enqueue(launch, 5)
    b.record()
    b.synchronize()
    kernel_ms = a.elapsed_time(b) / 5
    n = launches_for(window_ms, kernel_ms)
    cycles = int(window_ms * 1e3 * idle_mhz)
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    go, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    burst_end = torch.cuda.Event(enable_timing=True)
    gate_s = n * host_s * 1.5 + 2e-3
    torch.cuda._sleep(int(gate_s * per_s))
    go.record(main)
    with torch.cuda.stream(side):
        side.wait_event(go)
        start.record(side)
        torch.cuda._sleep(cycles)
        end.record(side)
    enqueue_s = _enqueue(launch, n)
    burst_end.record(main)
    nvml: list[int] = []
    if reader is not None:
        while not end.query():
            nvml.append(reader.sample()[0])
            time.sleep(1e-3)
    torch.cuda.synchronize()
    elapsed = start.elapsed_time(end)
    # the burst ran without host gaps (enqueued before the gate opened) and outlasted the spin
    covered = enqueue_s < gate_s and start.elapsed_time(burst_end) >= elapsed
    return Witness(mhz=spin_mhz(cycles, elapsed), idle_mhz=idle_mhz, kernel_ms=kernel_ms, launches=n,
                   window_ms=elapsed, covered=covered, nvml_mhz=tuple(x for x in nvml if x > 0))


def summary(w: Witness, median_us: float | None = None) -> dict[str, Any]:
    """The witness as a results-row field; with the trial's ``median_us`` also its length in SM
    cycles at the witnessed clock (``kcycles``), the figure a clock change does not move."""
    out: dict[str, Any] = {"mhz": round(w.mhz, 1), "idle_mhz": round(w.idle_mhz, 1), "ratio": round(w.ratio, 4),
                           "launches": w.launches, "window_ms": round(w.window_ms, 2), "covered": w.covered,
                           "nvml_mhz": [min(w.nvml_mhz), max(w.nvml_mhz)] if w.nvml_mhz else None}
    if median_us is not None:
        out["kcycles"] = round(median_us * w.mhz / 1e3, 2)
    return out


def _version_launch(kernel: str, version: str, trial: str) -> Callable[[], None]:
    from pytest_kforge.registry import load_kernel

    v = load_kernel(kernel).version(version)
    return v.launcher(v.spec.trial(trial).params, seed=0, device="cuda")


def _gemm_launch(n: int) -> Callable[[], Any]:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.clockwitness", description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="mla")
    ap.add_argument("--kernel-version", default="", help="comma-separated versions to witness")
    ap.add_argument("--trial", default="decode,spec", help="comma-separated trial names")
    ap.add_argument("--gemm", type=int, default=0, help="also witness an n x n x n cuBLAS bf16 GEMM")
    ap.add_argument("--window-ms", type=float, default=50.0)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("ERROR: torch is not importable; the witness needs torch with CUDA.")
        return 2
    if not torch.cuda.is_available():
        print("ERROR: no CUDA GPU is visible; run the witness on the GPU machine.")
        return 2
    if args.window_ms <= 0:
        print(f"ERROR: --window-ms {args.window_ms}: give a positive number of milliseconds (e.g. 50).")
        return 2
    from pytest_kforge.gpuclock import reader_for

    reader = reader_for("cuda")
    jobs: list[tuple[str, Callable[[], Callable[[], Any]]]] = []
    for version in (x for x in args.kernel_version.split(",") if x):
        for trial in (x for x in args.trial.split(",") if x):
            jobs.append((f"{version} {trial}", functools.partial(_version_launch, args.kernel, version, trial)))
    if args.gemm:
        jobs.append((f"cuBLAS bf16 GEMM {args.gemm}^3", lambda: _gemm_launch(args.gemm)))
    if not jobs:
        print("ERROR: nothing to witness; give --kernel-version and --trial, or --gemm N.")
        return 2
    rows = {}
    for name, make in jobs:
        w = witness(make(), window_ms=args.window_ms, reader=reader)
        print(w.line(name), flush=True)
        rows[name] = summary(w)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
