"""Where a CuTe MLA version's host time per call goes, on a GPU: each layer of the public call timed alone.

``benchmarks.public_call`` reports one figure per call (the host time of ``version(**inputs, **outputs)`` issued back
to back).  This peels the layers off one at a time, on the same tensors and the shape's plan, with the device busy
as in a serving loop (calls issued in batches of ``--batch``, a synchronize between batches, untimed, so the launch
queue never fills):

- ``public``: ``version(**inputs, **outputs)``, the documented call
- ``public, 3 sets in turn`` / ``plan, 3 sets in turn``: the same with three input sets called in turn (new
  addresses on every call, as ``benchmarks.public_call`` times them one call at a time)
- ``launch_split_combine``: the version's host function under ``run`` (checks, plan lookup, addresses, launch)
- ``plan``: the plan's ``launch`` alone (binding lookup, address test, the launches)
- ``packed launch``: the launch alone, as the plan makes it (one ctypes call into the compiled host code)
- ``library launch``: the same kernel through the DSL's ``run_compiled_program`` (what ``KFORGE_CUTE_FASTCALL=0``
  runs)
- ``torch launch``: ``x.add_(1)`` on a 1-element CUDA tensor, the floor of one kernel launch from Python on this host
- ``stream getter``: the raw current-stream lookup the call makes

The medians (us per call, of ``--reps`` batches) print one line each.  Needs a GPU and the CuTe DSL::

    python kernels/mla/tools/host_launch.py --version v59_cute --trial decode [--batch 50] [--reps 40]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def per_call_us(fn: Callable[[], Any], batch: int, reps: int) -> float:
    """Median over ``reps`` batches of the host time per call of ``batch`` calls of ``fn`` issued back to back."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        out.append((time.perf_counter() - t0) / batch * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="v59_cute")
    ap.add_argument("--trial", default="decode")
    ap.add_argument("--batch", type=int, default=50, help="calls per timed batch (the launch queue must not fill)")
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    from pytest_kforge.registry import load_version
    from pytest_kforge.spec import poison_

    if not torch.cuda.is_available():
        print("host_launch: no CUDA GPU here; run it on the GPU machine.", file=sys.stderr)
        return 2
    v = load_version("mla", args.version)
    params = dict(v.spec.trials[args.trial])
    # three input sets at different addresses: a call with new buffers rewrites the binding's addresses (stop 51)
    sets = []
    for seed in (0, 1, 2):
        outs = v.spec.alloc_outputs(params, device="cuda")
        poison_(outs)  # the outputs only: the inputs hold the softmax scale, a float
        sets.append((v.spec.make_inputs(params, seed=seed, device="cuda"), outs))
    inputs, outputs = sets[0]
    tensors = {**inputs, **outputs}
    v(**tensors)
    torch.cuda.synchronize()
    host = sys.modules["kforge_kernels.mla.cute.host"]
    plan_mod = sys.modules["kforge_kernels.mla.cute.plan"]
    fastcall = sys.modules["kforge_kernels._shared.cute_fastcall"]
    plan = next(reversed(plan_mod.PLANS.values()))  # the plan the call just used (the LRU end)
    (bkey, binding), = plan.bindings.items()
    stream, scale, n_pages = bkey
    addrs = binding.last  # the address tuple the call just wrote
    cfg = dict(v.config)
    q, kv, bt, lens = inputs["q"], inputs["kv_cache"], inputs["block_table"], inputs["cache_seqlens"]
    o, lse, sc = outputs["out"], outputs["lse"], inputs["softmax_scale"]
    kind = plan.key[0]  # the kind the version passes launch_split_combine
    ck = host.config_key(cfg)
    one = torch.zeros(1, device="cuda")
    get_stream = fastcall.stream_getter()
    dev = q.get_device()
    first = binding.launches[0]
    others = [{**ins, **outs} for ins, outs in sets[1:]]
    addr_sets = [addrs]
    for t in others:  # each set's address tuple as the binding writes it (plan.ADDRESS_NAMES' order)
        v(**t)
        addr_sets.append(binding.last)
    v(**tensors)  # the binding holds set 0's addresses again, as the same-buffer layers expect
    torch.cuda.synchronize()
    rotation = itertools.cycle([tensors, *others])
    addr_rotation = itertools.cycle(addr_sets)
    layers: list[tuple[str, Callable[[], Any]]] = [
        ("public", lambda: v(**tensors)),
        ("public, 3 sets in turn", lambda: v(**next(rotation))),
        ("plan, 3 sets in turn", lambda: plan.launch(next(addr_rotation), stream, scale, n_pages)),
        ("launch_split_combine", lambda: host.launch_split_combine(q, kv, bt, lens, sc, o, lse, kind, ck, True, None)),
        ("plan", lambda: plan.launch(addrs, stream, scale, n_pages)),
        (f"packed launch x{len(binding.calls)}", lambda: [c() for c in binding.calls]),
    ]
    if getattr(first, "_run", None) is not None and getattr(first, "_exe_args", None) is not None:
        layers.append((f"library launch x{len(binding.launches)}",
                       lambda: [m._run(m._exe_args) for m in binding.launches]))
    layers += [("torch launch", lambda: one.add_(1)), ("stream getter", lambda: get_stream(dev))]
    print(f"{args.version} {args.trial} on {torch.cuda.get_device_name()}: host us per call (median of {args.reps} "
          f"batches of {args.batch}, device busy; packed launch {'on' if fastcall.enabled() else 'off'})")
    for name, fn in layers:
        print(f"  {name:26s} {per_call_us(fn, args.batch, args.reps):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
