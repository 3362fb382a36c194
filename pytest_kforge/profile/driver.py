"""The program ncu profiles: one version, one trial config, one call inside the NVTX range.

    python -m pytest_kforge.profile.driver --kernel mla --version v1 --trial decode
    python -m pytest_kforge.profile.driver --kernel mla --version peer:flashmla --trial spec

A ``peer:NAME`` version is one of the repository's peers (``benchmarks/peers``, run from the
repository root): its ``prepare`` runs once before the warm-up, so ncu sees only its timed call.

Builds the spec's inputs once on the GPU, calls the version ``--warmup`` times outside any NVTX
range (JIT compilation, autotuning and allocator warm-up happen there), synchronises, then calls
it once inside the push/pop range ``kforge``, so ncu (``--nvtx-include kforge/``) replays only the
kernels of that one call.  Exit codes: 0 ok, 2 bad arguments, 3 version does not support the
trial, 4 no GPU, 5 the version raised, 6 the version's DSL toolchain does not import.  The last
line on stderr starting with ``KFORGE-DRIVER:`` says what happened, for the collector's fault
messages; before an ``ok:`` line a ``loaded:`` line names the kernel-folder modules the run
imported (the profiler detects the version's features in them).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .command import NVTX_RANGE

EXIT_OK, EXIT_ARGS, EXIT_UNSUPPORTED, EXIT_NO_GPU, EXIT_RAISED, EXIT_TOOLCHAIN = 0, 2, 3, 4, 5, 6


def _say(msg: str) -> None:
    print(f"KFORGE-DRIVER: {msg}", file=sys.stderr, flush=True)


def _peer_version(kernel: str, name: str, kernels_dir: str | None, device: str) -> Any:
    """``peer:NAME`` as a version (``benchmarks.peers.PeerVersion``)."""
    try:
        from benchmarks.peers import PeerVersion, get_peer
    except ImportError as exc:
        raise ValueError(f"peer:{name} needs the repository's benchmarks package ({exc}); "
                         f"run the driver from the repository root") from exc
    from pytest_kforge.registry import load_kernel

    peer = get_peer(name)
    if peer.kernel != kernel:
        raise ValueError(f"peer {name!r} is for kernel {peer.kernel!r}, not {kernel!r}")
    return PeerVersion(peer, load_kernel(kernel, kernels_dir).spec, device)


def _median_us(version, inputs, outputs, config, n: int) -> float:
    """Median of ``n`` CUDA-event timings of one call, with a 512 MB write flushing L2 before each."""
    import torch

    flush = torch.empty(512 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    times = []
    for _ in range(n):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        version.fn(**inputs, **outputs, config=config)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.profile.driver", description=__doc__.split("\n")[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--trial", required=True)
    ap.add_argument("--kernels-dir", default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu only for smoke tests (no NVTX, no timing)")
    ap.add_argument("--params", default="", help="override the trial's params: b=16,s=1,t=4096,h=128")
    ap.add_argument("--time", type=int, default=0, metavar="N",
                    help="instead of the NVTX call: time N calls with CUDA events (L2 flushed before each) "
                         "and print the median, to compare with ncu's durations (run it without ncu)")
    args = ap.parse_args(argv)

    from pytest_kforge.registry import _PKG, load_version

    version: Any
    try:
        if args.version.startswith("peer:"):
            version = _peer_version(args.kernel, args.version.removeprefix("peer:"), args.kernels_dir, args.device)
        else:
            version = load_version(args.kernel, args.version, args.kernels_dir)
        trial = version.spec.trial(args.trial)
        if args.params:
            trial = trial.with_params(**{k.strip(): int(v) for k, v in
                                         (kv.split("=") for kv in args.params.split(",") if kv.strip())})
    except Exception as exc:  # noqa: BLE001 - reported as one line to the collector
        _say(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}")
        return EXIT_ARGS
    missing = version.toolchain_missing()
    if missing is not None:
        cause = missing.__cause__
        _say(f"toolchain: {type(cause).__name__}: {cause}" if cause else f"toolchain: {missing}")
        return EXIT_TOOLCHAIN
    absent = version.peer.available() if hasattr(version, "peer") else None  # a peer that cannot run here
    why = f"peer {version.name} is not available here: {absent}" if absent else version.supports(trial.params)
    if why:
        _say(f"unsupported: {args.kernel} {args.version} does not support {trial.id}: {why}")
        return EXIT_UNSUPPORTED

    import torch

    on_gpu = args.device.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        _say("no-gpu: torch.cuda.is_available() is False")
        return EXIT_NO_GPU
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    spec = version.spec
    inputs = spec.make_inputs(trial.params, seed=args.seed, device=args.device)
    outputs = spec.alloc_outputs(trial.params, device=args.device)
    config = dict(version.config)
    t0 = time.perf_counter()
    try:
        prepare = getattr(version.module, "prepare", None)
        if callable(prepare):  # ahead-of-time compile, when the version offers it
            prepare(dict(trial.params), config)
        if hasattr(version, "peer"):
            version.peer.prepare(**inputs)  # plans, metadata, JIT: untimed, outside the range
        for _ in range(max(0, args.warmup)):
            version.fn(**inputs, **outputs, config=config)
        sync()
        t1 = time.perf_counter()
        if args.time > 0 and on_gpu:
            med = _median_us(version, inputs, outputs, config, args.time)
            _say(f"timing: {args.kernel} {args.version} {trial.id} median_us={med:.2f} n={args.time}")
            return EXIT_OK
        if on_gpu:
            torch.cuda.nvtx.range_push(NVTX_RANGE)
        try:
            version.fn(**inputs, **outputs, config=config)
        finally:
            if on_gpu:
                torch.cuda.nvtx.range_pop()
        sync()
    except Exception as exc:  # noqa: BLE001
        _say(f"raised: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return EXIT_RAISED
    _say("loaded: " + ",".join(sorted(n for n in sys.modules if n.startswith(_PKG + "."))))
    _say(f"ok: {args.kernel} {args.version} {trial.id} warmup={args.warmup} "
         f"warmup_s={t1 - t0:.3f} profiled_s={time.perf_counter() - t1:.3f}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
