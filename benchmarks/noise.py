"""What disturbs a timing on a shared machine: one trial timed under each kind of background load.

    python -m benchmarks.noise --kernel mla --version v23_cute --trial spec --rounds 1500 \\
        --loads none,cpu,idle-ctx,launch,compile,compile-nogpu --workers 11 --json noise.json

The shared-GPU mode (``--kforge-workers-per-gpu``) gives each timed section the GPU alone, yet
its spec trials showed steps of 1-3% lasting tens of milliseconds (runs 7-8).  This script
separates the candidate causes.  For each load it starts ``--workers`` background processes,
waits until they run, times the trial with the harness's own clock (:func:`time_launch`: L2
flush, spin, CUDA events, per-round SM clock from NVML) and stops them.  The loads:

* ``none``          -- nothing else runs (the reference);
* ``cpu``           -- busy Python loops: host CPU contention only, no CUDA at all;
* ``idle-ctx``      -- each process holds a CUDA context and sleeps;
* ``launch``        -- each process launches a tiny kernel and synchronises every 2 ms;
* ``ctx-churn``     -- each process starts short-lived Python processes that create a context;
* ``compile``       -- each process compiles the version for other shapes (``prepare``) with
                       the DSL's file cache off, as shared-mode workers do, GPU visible;
* ``compile-nogpu`` -- the same with ``CUDA_VISIBLE_DEVICES=-1`` (compilation without the GPU).

``--clock-guard 0,99`` times each load without and with the harness's throttle guard (see
:mod:`pytest_kforge.gpuclock`); ``--heat-s 3`` first runs the kernel back to back for 3 s.
Per load the report gives the median, the spread (IQR %), the share of rounds more than 1% above
the first load's median ("slow rounds"; ``none`` comes first by default) and the SM clock range, so a load that
causes the steps shows
up as slow rounds at an unchanged clock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["LOADS", "summarize_load", "main"]

LOADS = ("none", "cpu", "idle-ctx", "launch", "ctx-churn", "compile", "compile-nogpu")
#: (s, h) shapes the compile load cycles through (none of them the timed trial's)
_COMPILE_SHAPES = [(s, h) for h in (16, 32, 64) for s in (1, 2, 3, 4, 5, 6, 7, 8)]


def summarize_load(samples_us: Sequence[float], reference_us: float, clock_mhz: Sequence[int]) -> dict[str, Any]:
    """Median, spread, slow-round share (> 1% over ``reference_us``) and clock range of one load."""
    q = statistics.quantiles(samples_us, n=4, method="inclusive")
    med = statistics.median(samples_us)
    slow = sum(x > 1.01 * reference_us for x in samples_us)
    read = [m for m in clock_mhz if m > 0]
    return {"median_us": med, "spread_pct": 100.0 * (q[2] - q[0]) / med, "rounds": len(samples_us),
            "slow_pct": 100.0 * slow / len(samples_us), "p99_us": statistics.quantiles(samples_us, n=100)[98],
            "clock_mhz": [min(read), max(read)] if read else None}


def _disturb(kind: str, kernel: str, version: str, index: int) -> None:
    """Body of one background process (runs until killed)."""
    if kind == "cpu":
        x = 0
        while True:
            x = (x * 1103515245 + 12345) % 2**31
    import torch

    if kind == "idle-ctx":
        torch.zeros(1, device="cuda")
        while True:
            time.sleep(1.0)
    if kind == "launch":
        x = torch.zeros(1, device="cuda")
        while True:
            x.add_(1)
            torch.cuda.synchronize()
            time.sleep(0.002)
    if kind == "ctx-churn":
        while True:
            subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1, device='cuda')"], check=False)
    if kind in ("compile", "compile-nogpu"):
        from pytest_kforge.registry import load_kernel

        v = load_kernel(kernel).version(version)
        prepare = getattr(v.module, "prepare", None)
        if prepare is None:
            raise SystemExit(f"{version} has no prepare(): the compile load needs one")
        i = index
        while True:
            s, h = _COMPILE_SHAPES[i % len(_COMPILE_SHAPES)]
            prepare({"b": 2, "s": s, "h": h, "t": 256}, dict(v.config))
            i += 7  # workers walk the shapes at different offsets
    raise SystemExit(f"unknown load {kind!r}; pick from {', '.join(LOADS)}")


def _start(kind: str, workers: int, kernel: str, version: str) -> list[subprocess.Popen]:
    if kind == "none":
        return []
    env = dict(os.environ)
    if kind == "compile-nogpu":
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    if kind.startswith("compile"):
        env["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"  # every prepare compiles for real
        env["CUDA_TILE_CACHE_SIZE"] = "0"
    return [subprocess.Popen([sys.executable, "-m", "benchmarks.noise", "--disturb", kind, "--kernel", kernel,
                              "--version", version, "--index", str(i)], env=env,
                             stdout=subprocess.DEVNULL, stderr=None if i == 0 else subprocess.DEVNULL)
            for i in range(workers)]  # the first one's errors show (a load that cannot run)


def _stop(procs: list[subprocess.Popen]) -> list[int | None]:
    for p in procs:
        p.kill()
    return [p.wait() for p in procs]


def run(kernel: str, version: str, trial_name: str, loads: Sequence[str], workers: int, rounds: int,
        ramp_s: float, guards: Sequence[float] = (0.0,), heat_s: float = 0.0, log: Any = print) -> dict[str, Any]:
    """Time the trial under each load and each guard setting; rows keyed ``load`` (one guard) or ``load@guard``."""
    from pytest_kforge.registry import load_kernel
    from pytest_kforge.timing import make_clock, time_launch

    v = load_kernel(kernel).version(version)
    trial = v.spec.trial(trial_name)
    launch = v.launcher(trial.params, seed=0, device="cuda")
    launch()  # compile before any load starts
    out: dict[str, Any] = {"kernel": kernel, "version": version, "trial": trial.id, "workers": workers,
                           "rounds": rounds, "clock_guard_pct": list(guards), "heat_s": heat_s, "loads": {}}
    reference = None
    for kind, guard_pct in ((k, g) for k in loads for g in guards):
        procs = _start(kind, workers, kernel, version)
        try:  # never leave the background processes running (some hold CUDA contexts)
            # compile loads first import the DSL (~10 s of CPU per process): time once they compile
            time.sleep(0.0 if not procs else max(ramp_s, 20.0) if kind.startswith("compile") else ramp_s)
            early = [p.poll() for p in procs if p.poll() is not None]
            _heat(launch, heat_s)
            res = time_launch(launch, clock=make_clock("cuda", guard_pct), rounds=rounds, warmup=20)
        finally:
            codes = _stop(procs)
        samples = [x * 1e6 for x in res.samples_s]
        reference = reference or statistics.median(samples)
        row = summarize_load(samples, reference, res.clock_mhz)
        row["background_exited_early"] = len(early)
        row["retaken"] = res.retaken
        row["samples_us"] = samples
        key = kind if len(guards) == 1 else f"{kind}@{guard_pct:g}"
        out["loads"][key] = row
        log(f"{key:14s} median {row['median_us']:8.1f} us  spread {row['spread_pct']:5.2f}%  slow rounds "
            f"{row['slow_pct']:5.1f}%  p99 {row['p99_us']:8.1f}  clock {row['clock_mhz']}  retaken {res.retaken}  "
            f"(workers exited early: {len(early)}, exit codes {sorted(set(c for c in codes if c is not None))})")
    return out


def _heat(launch: Any, seconds: float) -> None:
    """Run the kernel back to back for ``seconds`` (untimed), so the GPU starts at its power cap."""
    if seconds <= 0:
        return
    import torch

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(20):
            launch()
        torch.cuda.synchronize()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.noise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="mla")
    ap.add_argument("--version", default="v23_cute")
    ap.add_argument("--trial", default="spec")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--workers", type=int, default=11)
    ap.add_argument("--rounds", type=int, default=1500, help="timed rounds per load (at least 4)")
    ap.add_argument("--ramp-s", type=float, default=4.0, help="seconds the background runs before timing")
    ap.add_argument("--clock-guard", default="0",
                    help="the harness's throttle guard, %% of the max SM clock; a list times each load under each "
                         "(default 0: off, to see the raw noise; e.g. 0,99)")
    ap.add_argument("--heat-s", type=float, default=0.0,
                    help="run the kernel back to back this long before each timing (start at the power cap)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--disturb", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.disturb:
        _disturb(args.disturb, args.kernel, args.version, args.index)
        return 0
    if args.rounds < 4:
        raise SystemExit(f"--rounds {args.rounds}: give at least 4 (the spread needs quartiles)")
    loads = [x.strip() for x in args.loads.split(",") if x.strip()]
    bad = [x for x in loads if x not in LOADS]
    if bad:
        raise SystemExit(f"--loads: unknown {', '.join(bad)}; pick from {', '.join(LOADS)}")
    try:
        guards = [float(x) for x in args.clock_guard.split(",") if x.strip()]
    except ValueError:
        guards = []
    if not guards or not all(0 <= g < 100 for g in guards):
        raise SystemExit(f"--clock-guard {args.clock_guard!r}: give percentages from 0 (off) to below 100, "
                         f"like 99 or 0,99")
    out = run(args.kernel, args.version, args.trial, loads, args.workers, args.rounds, args.ramp_s, guards, args.heat_s)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
