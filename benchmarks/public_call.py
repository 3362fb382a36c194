"""Where the time of one public MLA call goes, and whether it captures in a CUDA graph (issue 39's diagnosis).

For each candidate (a version through ``load_version(...)(...)``, optionally the same version through a
legacy host module, and peers such as ``flashinfer_fa3`` planned once) on each trial:

* ``harness_us``: the harness's figure (flush + spin sized to the host time + events); ``user_us``: the call
  timed as a user would (:func:`user_us`); ``b2b_us`` / ``host_us``: event and host time per call issued back
  to back (:func:`loop_us`);
* ``trace``: one call under ``torch.profiler``: device kernels, memsets and memcpys, and the CUDA runtime
  calls that allocate or synchronise (``cudaMalloc``, ``cudaStreamSynchronize``, ``cudaMemcpy``...);
* ``graph``: capture after a side-stream warm-up, replay on new values, compare with the reference: "ok" or
  the error text.

``--legacy PATH`` loads PATH (an older ``cute/host.py``) and runs the CuTe versions through its
``run_split_combine``, for a before/after in one process (its compile cache is shared).  Writes JSON and a
markdown table to ``--out``.  GPU only::

    python -m benchmarks.public_call --versions v59_cute --peers flashinfer_fa3 --legacy old_host.py --out DIR
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_RUNTIME_OF_INTEREST = ("cudaMalloc", "cudaFree", "Synchronize", "cudaMemcpy", "cudaMemset", "cuMemAlloc",
                        "cuModuleLoad", "cuLibraryLoad", "cudaStreamIsCapturing", "cuLaunchKernel", "cudaLaunchKernel")


def user_us(calls: list[Callable[[], Any]], n: int = 40, sleep_us: float = 5.0) -> float:
    """Median event time of a call as a user times it: L2 made cold by writing a buffer of twice its size, a short
    fixed sleep kernel, then start event, the call, end event (the issue-39 method; nothing adapts to the host).

    A call whose host time exceeds the flush plus the sleep lets the device idle inside the events."""
    import torch

    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size or 64 * 2**20
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for c in calls:
        c()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    torch.cuda.synchronize()
    for i, (s, e) in enumerate(pairs):
        flush.fill_(i & 0xFF)
        torch.cuda._sleep(int(sleep_us * 1.98e3))
        s.record()
        calls[i % len(calls)]()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in pairs)


def loop_us(calls: list[Callable[[], Any]], n: int = 60) -> tuple[float, float]:
    """(median event time of one call, median host time of one call) with ``calls`` issued back to back, no flush
    and no sleep (a serving loop): when the host needs longer than the device, the wait is timed.  Pass one call
    per input set: rotated, each finds its inputs out of L2."""
    import torch

    for c in calls:
        c()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    hosts = []
    torch.cuda.synchronize()
    for i, (s, e) in enumerate(pairs):
        s.record()
        t0 = time.perf_counter()
        calls[i % len(calls)]()
        hosts.append(time.perf_counter() - t0)
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in pairs), statistics.median(hosts) * 1e6


def _trace(call: Callable[[], Any]) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    device, runtime = [], {}
    for ev in prof.events():
        name = ev.name
        if getattr(ev, "device_type", None) == torch.autograd.DeviceType.CUDA:
            device.append(name[:60])
        elif any(k in name for k in _RUNTIME_OF_INTEREST) and "cudaDeviceSynchronize" not in name:
            runtime[name] = runtime.get(name, 0) + 1
    return {"device": device, "runtime": runtime}


def _graph(v: Any, inputs: dict, outputs: dict, params: dict, run: Callable[..., Any], keep_plan: bool) -> str:
    import torch

    from pytest_kforge.spec import poison_

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                run(inputs, outputs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run(inputs, outputs)
        fresh = v.spec.make_inputs(params, seed=77, device="cuda")
        keep = ("block_table", "cache_seqlens") if keep_plan else ()  # a planned peer keeps its lengths
        for k, t in fresh.items():
            if hasattr(t, "copy_") and k not in keep:
                inputs[k].copy_(t)
        poison_(outputs)
        g.replay()
        torch.cuda.synchronize()
        bad = [r.name for r in v.spec.compare(outputs, v.spec.reference(inputs)) if not r.ok]
        return "ok" if not bad else f"replay wrong: {bad}"
    except Exception as exc:  # noqa: BLE001 - the diagnosis is the error text
        torch.cuda.synchronize()
        return f"{type(exc).__name__}: {str(exc)[:300]}"


def measure(label: str, v: Any, trial: str, run: Callable[..., Any], prepare: Callable[..., Any] | None) -> dict:
    from pytest_kforge.spec import poison_
    from pytest_kforge.timing import median_device_us

    params = v.spec.trial(trial).params
    sets = []
    for seed in (1, 2, 3):
        inputs = v.spec.make_inputs(params, seed=seed, device="cuda")
        outputs = v.spec.alloc_outputs(params, device="cuda")
        poison_(outputs)
        if prepare is not None:
            prepare(inputs)
        sets.append((inputs, outputs))
    calls = [lambda i=i, o=o: run(i, o) for i, o in sets]
    row: dict[str, Any] = {"candidate": label, "trial": trial}
    row["harness_us"] = median_device_us(calls[0], rounds=30, warmup=3)
    # a peer plans per input set (FlashInfer's plan holds the lengths): rotating sets would time its re-planning
    rotated = calls if prepare is None else calls[:1]
    row["user_us"] = user_us(rotated)
    row["b2b_us"], row["host_us"] = loop_us(rotated)
    bad = [r.name for r in v.spec.compare(sets[0][1], v.spec.reference(sets[0][0])) if not r.ok]
    row["correct"] = not bad
    row["trace"] = _trace(calls[0])
    row["graph"] = _graph(v, *sets[0], params, run, keep_plan=prepare is not None)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="v59_cute")
    ap.add_argument("--peers", default="")
    ap.add_argument("--trials", default="decode,spec")
    ap.add_argument("--legacy", default=None, help="an older cute/host.py to compare with")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    if not torch.cuda.is_available():
        print("public_call: no CUDA GPU is visible (it times launches on the GPU); run it on the GPU machine.",
              file=sys.stderr)
        return 2
    from pytest_kforge.registry import load_version

    rows: list[dict[str, Any]] = []

    def show(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("candidate", "trial", "harness_us", "user_us", "b2b_us", "host_us", "graph",
                                                  "error")}), flush=True)

    trials = args.trials.split(",")
    names = [n for n in args.versions.split(",") if n]
    for trial in trials:
        for name in names:
            v = load_version("mla", name)
            show(measure(name, v, trial, lambda i, o, v=v: v(**i, **o), None))
        for peer_name in filter(None, args.peers.split(",")):
            from benchmarks.peers import PeerVersion, get_peer

            peer = get_peer(peer_name)
            why = peer.available()
            if why:
                show({"candidate": peer_name, "trial": trial, "error": why})
                continue
            pv = PeerVersion(peer, load_version("mla", "v0").spec)
            cfg = dict(peer.config)
            show(measure(peer_name, pv, trial, lambda i, o, f=pv.fn, c=cfg: f(**i, **o, config=c),
                         lambda i, p=peer: p.prepare(**i)))
    # last: a failed capture of the legacy path must not disturb the rows above
    for name in names if args.legacy else ():
        v = load_version("mla", name)
        if v.language != "cute-dsl":
            continue
        host = sys.modules["kforge_kernels.mla.cute.host"]
        spec = importlib.util.spec_from_file_location("kforge_kernels.mla._cute_host_legacy", args.legacy)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        old._CACHE, old._TAIL, old._REDO_FLAGS = host._CACHE, host._TAIL, host._REDO_FLAGS
        new = host.run_split_combine
        host.run_split_combine = old.run_split_combine
        try:
            for trial in trials:
                show(measure(f"{name} (legacy host)", v, trial, lambda i, o, v=v: v(**i, **o), None))
        finally:
            host.run_split_combine = new
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "public_call.json").write_text(json.dumps(rows, indent=1))
    lines = ["| candidate | trial | harness us | user-timed us | back-to-back us | host us/call | device ops in one "
             "call | runtime calls of interest | CUDA graph |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['candidate']} | {r['trial']} | {r['error']} | | | | | | |")
            continue
        t = r["trace"]
        lines.append(f"| {r['candidate']} | {r['trial']} | {r['harness_us']:.1f} | {r['user_us']:.1f} | {r['b2b_us']:.1f} | "
                     f"{r['host_us']:.1f} | {len(t['device'])}: {', '.join(sorted(set(t['device'])))[:120]} | "
                     f"{', '.join(f'{k} x{n}' for k, n in sorted(t['runtime'].items()))} | {r['graph']} |")
    (out / "public_call.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
