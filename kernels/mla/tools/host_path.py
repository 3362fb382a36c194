"""The Python part of a CuTe MLA version's host time, on the CPU: its public call up to the launch.

A decode step's host time is this Python (checks, plan lookup, address writes), the current-stream lookup and the
launch itself.  This times the first with the other two stubbed out (a no-op launch, stream 0) on CPU tensors of
a trial's shape, through the version's own ``run`` -- every line that runs per call on the GPU runs here too, but
the launch's own cost (``run_compiled_program`` or the packed call of ``kernels/_shared/cute_fastcall.py``) is a
GPU measurement (``benchmarks/public_call.py``).  The fake plan's binding lookup is a Python method, ~0.2 us more
than the real dict lookup, so the figure errs high.  Needs the CuTe DSL installed only for the imports::

    python kernels/mla/tools/host_path.py --version v59_cute --trial decode [--launches 1] [--api export]

Pin it to one core and compare runs pinned alike: on the project's 2-core sandbox a whole process ran ~2x slower
(6 vs 10-13 us, 2026-12-07) when it landed on core 0 (``taskset -c 0``) and never on core 1 (``taskset -c 1``).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


class _Ptr:  # what Binding.set writes: a make_ptr's C storage (``_desc``, in one shared array) and its ``_pointer``
    def __init__(self) -> None:
        self._desc, self._pointer = ctypes.c_void_p(0), 0
        self._c_pointers_cache = [ctypes.addressof(self._desc)]


def _stub(plan_mod: Any, launches: int) -> None:
    """Make the plan module build plans whose one binding launches ``launches`` no-ops (no compile, no GPU)."""
    real = plan_mod.Plan

    def fake(key: tuple, device: Any, stream: int) -> Any:
        p = object.__new__(real)
        p.sem, p.scratch, p.captured = None, None, False
        b = object.__new__(plan_mod.Binding)
        b.ptrs = {name: _Ptr() for name, _, _ in plan_mod._PTRS}
        b.rewritable, b.launches, b.last = True, [lambda: None] * launches, ()
        b.slots = plan_mod.fastcall.slotted(list(b.ptrs.values()))  # as a packed binding: one shared slot array
        b.write_pointers = False
        b.calls = tuple(b.launches)
        p.bindings = _AnyScale(b)
        return p

    plan_mod.Plan = fake


class _AnyScale(dict):
    """The binding lookup of a fake plan: one binding for any (stream, scale, pages)."""

    def __init__(self, binding: Any) -> None:
        super().__init__()
        self._b = binding

    def get(self, key: Any, default: Any = None) -> Any:
        return self._b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="v59_cute")
    ap.add_argument("--trial", default="decode")
    ap.add_argument("--launches", type=int, default=1, help="no-op launches per call (the plan's kernel count)")
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rotate", type=int, default=1,
                    help="input sets called in turn (1: the same buffers every call, as a serving loop passes them)")
    ap.add_argument("--api", choices=("public", "export"), default="public",
                    help="public: load_version(...)(**inputs, **outputs); export: the exported package's mla_decode "
                         "(python -m pytest_kforge.export into a temporary folder), a serving engine's call")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    from pytest_kforge.registry import load_version

    v = load_version("mla", args.version)
    if v.language != "cute-dsl":
        print(f"host_path: {args.version} is a {v.language} version; pass a CuTe DSL one.", file=sys.stderr)
        return 2
    params = dict(v.spec.trials[args.trial])
    sets = [(v.spec.make_inputs(params, seed=i, device="cpu"), v.spec.alloc_outputs(params, device="cpu"))
            for i in range(max(1, args.rotate))]
    import importlib

    run: Any = v
    if args.api == "export":
        import atexit
        import shutil
        import tempfile

        from pytest_kforge.export import export

        tmp = tempfile.mkdtemp(prefix="kf-host-")
        atexit.register(shutil.rmtree, tmp, True)
        done = export("mla", args.version, tmp, kernels_dir=ROOT / "kernels")
        sys.path.insert(0, str(done.root.parent))
        pkg = importlib.import_module(done.package)
        pkg._check = lambda *_a: None  # type: ignore[attr-defined]  # first call of a shape only: it wants CUDA
        pkg._prepare = None  # type: ignore[attr-defined]  # no compile: the launch is stubbed

        def run(**t: Any) -> Any:
            return pkg.mla_decode(t["q"], t["kv_cache"], t["block_table"], t["cache_seqlens"], t["softmax_scale"],
                                  out=t["out"], lse=t["lse"])

        plan_mod = importlib.import_module(f"{done.package}.cute.plan")
    else:
        plan_mod = importlib.import_module("kforge_kernels.mla.cute.plan")
    _stub(plan_mod, args.launches)
    torch.Tensor.get_device = lambda self: 0  # type: ignore[method-assign]  # CPU tensors say -1
    stream0 = type("Stream", (), {"cuda_stream": 0})()
    torch.cuda.current_stream = lambda index=None: stream0  # type: ignore[assignment]
    torch._C._cuda_getCurrentRawStream = lambda index: 0  # type: ignore[attr-defined]

    turn = [0]

    def call() -> Any:
        inputs, outputs = sets[turn[0] % len(sets)]
        turn[0] += 1
        return run(**inputs, **outputs)

    for _ in range(1000):
        call()
    reps = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(args.calls):
            call()
        reps.append((time.perf_counter() - t0) / args.calls * 1e6)
    print(f"{args.version} {args.trial} ({args.api} API): {min(reps):.2f} us min, {statistics.median(reps):.2f} us median per call "
          f"up to the launch (CPU, {args.launches} no-op launch(es), stream lookup stubbed, {len(sets)} input set(s) "
          f"in turn)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
