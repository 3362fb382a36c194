"""The plan of a CuTe DSL MLA call: the split decision, the kernels and the workspace, made once per shape.

Calling a ``cute.compile`` result marshals every argument again on every call (signature
rectification, adapter lookups, fresh C storage for each ``make_ptr`` / ``Int32`` / ``CUstream``):
run 27 measured 87-151 us of host time per call, longer than the decode kernel itself (73 us), so a
caller launching back to back waited on Python, and the per-call ``torch.empty`` / ``torch.zeros``
of the workspace made a call cost an allocation and a memset too.

A :class:`Plan` (one per shape, device and stream, built on the first call) decides the split,
compiles or looks up the kernels, and owns the workspace (partials, pair exchange, redo flags, the
tail grid's state, scratch outputs for a strided ``out``).  A :class:`Binding` (one per stream,
softmax scale and page count of a plan) marshals each launch's arguments once; the tensors'
addresses live in ``make_ptr`` objects whose C storage the binding rewrites in place before every
call, so a call is: six address writes, then one ``run_compiled_program`` per kernel on the
pre-marshalled arguments -- the library's own ``cuLaunchKernelEx`` on the caller's stream, which a
CUDA graph captures.  What the kernels receive is what ``fn(*args)`` would pass: the library reads
the same storage in both paths (a GPU test compares their outputs).

With a CuTe DSL whose pointer or executor internals differ, :func:`fastcall.rewritable` / ``fastcall.Marshalled``
fall back to the library call (slower, the same result); ``FALLBACKS`` records why.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from kforge_kernels._shared import cute_fastcall as fastcall
from kforge_kernels.mla.cute import host as host
from kforge_kernels.mla.cute.kinds import (bf16_partials, fused, pair_exchange_global, redo_kind, shape_kind,
                                            takes_finals, writes_redo_flags)

__all__ = ["Plan", "Binding", "plan_for", "PLANS", "FALLBACKS"]

#: implicit plans of ``run_split_combine``, least recently used first (see :func:`plan_for`)
PLANS: OrderedDict[tuple, Plan] = OrderedDict()
#: the newest plan built outside a graph capture, per shape without the stream (a capture reuses it)
_WARM: dict[tuple, Plan] = {}
MAX_PLANS = 32
#: why a binding fell back to the library call (GPU tests assert it stays empty on the supported CuTe DSL)
FALLBACKS: list[str] = []
#: the per-call pointers of a binding: (name, dtype name, assumed alignment)
_PTRS = (("q", "bf", 16), ("kv", "bf", 16), ("bt", "i32", 4), ("lens", "i32", 4), ("o", "bf", 16),
         ("l", "f32", 4), ("trace", "i32", 4))
#: the names of ``_PTRS``: the order of a :meth:`Plan.launch` address tuple
ADDRESS_NAMES = tuple(name for name, _, _ in _PTRS)


def _capturing() -> bool:
    import torch

    return torch.cuda.is_available() and bool(torch.cuda.is_current_stream_capturing())


def _launch(fn: Any, args: tuple, device_index: int) -> fastcall.Marshalled:
    """One kernel of a binding: ``fn`` with ``args`` marshalled once (or the library call, when it cannot be)."""
    return fastcall.Marshalled(fn, args, device_index, FALLBACKS)


class Binding:
    """A plan's launches for one (stream, softmax scale, page count): arguments marshalled once."""

    def __init__(self, plan: Plan, stream: int, scale: float, n_pages: int) -> None:
        import cuda.bindings.driver as cuda
        import cutlass
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_ptr

        dts = {"bf": cutlass.BFloat16, "f32": cutlass.Float32, "i32": cutlass.Int32}

        def ptr(dt: Any, addr: int, align: int = 16) -> Any:
            return make_ptr(dt, addr, cute.AddressSpace.gmem, assumed_align=align)

        # any address of the right alignment: the real ones are written before each call
        self.ptrs = {name: ptr(dts[dt], 1 << 20, align) for name, dt, align in _PTRS}
        self.rewritable = all(fastcall.rewritable(p) for p in self.ptrs.values())
        if not self.rewritable:
            FALLBACKS.append("make_ptr has no rewritable _desc: every call builds its binding again")
        # before the launches are marshalled: they must take the addresses of the shared slots
        self.slots = fastcall.slotted(list(self.ptrs.values())) if self.rewritable else None
        self.stream_obj = cuda.CUstream(stream)
        self.launches = _launches(plan, self.ptrs, ptr, cutlass.Int32, cutlass.Float32, self.stream_obj,
                                  cutlass.Float32(scale * host.LOG2_E), n_pages)
        # a launch the library marshals again per call (no executor internals) may read _pointer (the tvm-ffi path)
        self.write_pointers = self.slots is None or not all(m.marshalled for m in self.launches)
        self.last: tuple[int, ...] = ()  # the addresses written last (a serving loop passes the same buffers)
        # what a call runs: each launch's packed call itself where there is one (no dispatch through Marshalled)
        self.calls = tuple(m.call for m in self.launches)

    def set(self, addrs: tuple[int, ...]) -> None:
        """Write ``addrs`` (in ``_PTRS`` order) into the pointers (``Plan.launch`` calls it only when they differ
        from ``last``): one slice assignment into the shared slots, or each pointer's storage in turn."""
        if self.slots is not None:
            self.slots[:len(addrs)] = addrs
        if self.write_pointers:
            ptrs = self.ptrs
            for (name, _, _), addr in zip(_PTRS, addrs):
                p = ptrs[name]
                if self.slots is None:
                    p._desc.value = addr
                p._pointer = addr  # what the tvm-ffi path and repr read
        self.last = addrs


class Plan:
    """One shape's kernels and workspace on one device (see the module docstring).

    ``key``: (kind, b, s, h, block-table width, stages, num_splits, sm_count, tail_edge_pages, max_splits,
    allow_direct, traced, device index).  A plan's workspace serves one stream at a time.
    """

    def __init__(self, key: tuple, device: Any, stream: int) -> None:
        import torch

        self.key = key
        kind, b, s, h, max_blocks, stages, num_splits, sm_count, edge, max_splits, allow_direct, _traced, _dev = key
        self.b, self.s, self.h, self.stages, self.device = b, s, h, stages, device
        self.device_index = device.index or 0
        self.m_blocks = math.ceil(s * h / host.BLOCK_M)
        cfg = {"num_splits": num_splits, "sm_count": sm_count, "max_splits": max_splits}
        self.splits, self.slots, self.paired = host.split_plan(
            kind, host.choose_splits(b * self.m_blocks, max_blocks, cfg))
        one = allow_direct and self.slots == 1
        self.kind = shape_kind(kind, one_split=one and not self.paired)
        self.path = "tail" if one and host._runs_tail(self.kind, self.paired) else ("direct" if one else "split")
        f32, i32 = torch.float32, torch.int32
        self.ws = (torch.empty(b * self.m_blocks * self.splits * host.PAIR_EXCHANGE_WORDS, dtype=f32, device=device)
                   if self.paired and pair_exchange_global(self.kind) else None)
        self.flags = (host._redo_flags(b * self.m_blocks, device, stream)
                      if self.path == "direct" and writes_redo_flags(self.kind) and not self.paired else None)
        self.tail = self.parts = self.sem = None
        if self.path == "tail":
            _, _, rows_pad, _ = host.compiled(self.kind, s, h, stages, direct=True)
            self.tail = host._tail_state(self.kind, b, self.m_blocks, rows_pad, max_blocks, device, edge)
        elif self.path == "split":
            _, _, rows_pad, _ = host.compiled(self.kind, s, h, stages, paired=self.paired)
            pdt = torch.bfloat16 if bf16_partials(self.kind) else f32
            self.parts = (torch.empty(self.slots, b, rows_pad, host.D_V, dtype=pdt, device=device),
                          torch.empty(self.slots, b, rows_pad, dtype=f32, device=device))
            if fused(self.kind):  # one arrival counter per (sequence, row block), zeroed before each call
                self.sem = torch.zeros(b * self.m_blocks, dtype=i32, device=device)
        self.scratch: tuple[Any, Any] | None = None  # dense out / lse for callers passing strided views
        self.bindings: dict[tuple[int, float, int], Binding] = {}
        self.captured = False

    def scratch_for(self, out: Any, lse: Any) -> tuple[Any, Any]:
        import torch

        if self.scratch is None or self.scratch[0].shape != out.shape or self.scratch[1].shape != lse.shape:
            self.scratch = (torch.empty(out.shape, dtype=out.dtype, device=self.device),
                            torch.empty(lse.shape, dtype=lse.dtype, device=self.device))
        return self.scratch

    def __call__(self, addrs: Mapping[str, int], stream: int, scale: float, n_pages: int) -> None:
        """Launch every kernel of the plan on ``stream`` with the tensors at ``addrs`` (by the names of ``_PTRS``;
        ``trace`` optional)."""
        order = tuple(addrs[n] for n in ADDRESS_NAMES[:6])
        self.launch(order + (addrs["trace"],) if "trace" in addrs else order, stream, scale, n_pages)

    def launch(self, addrs: tuple[int, ...], stream: int, scale: float, n_pages: int) -> None:
        """:meth:`__call__` with the addresses as a tuple in ``_PTRS`` order (q, kv, bt, lens, o, l[, trace]): the
        per-call path."""
        binding = self.bindings.get((stream, scale, n_pages))  # only rewritable bindings are kept
        if binding is None:
            binding = Binding(self, stream, scale, n_pages)
            if binding.rewritable:
                self.bindings[(stream, scale, n_pages)] = binding
            else:  # build the library's pointers afresh with the real addresses
                binding = _fresh(self, binding, addrs, stream, scale, n_pages)
                binding.last = addrs
        if addrs != binding.last:  # a serving loop passes the same buffers: one tuple compare, no writes
            binding.set(addrs)
        if self.sem is not None:
            self.sem.zero_()
        for launch in binding.calls:
            launch()


def _fresh(plan: Plan, binding: Binding, addrs: tuple[int, ...], stream: int, scale: float, n_pages: int) -> Binding:
    """A binding whose pointers were made with this call's addresses (the fallback of a non-rewritable DSL)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    dts = {"bf": cutlass.BFloat16, "f32": cutlass.Float32, "i32": cutlass.Int32}
    given = dict(zip(ADDRESS_NAMES, addrs))
    binding.ptrs = {name: make_ptr(dts[dt], given.get(name, 1 << 20), cute.AddressSpace.gmem, assumed_align=al)
                    for name, dt, al in _PTRS}
    binding.launches = _launches(plan, binding.ptrs,
                                 lambda dt, a, al=16: make_ptr(dt, a, cute.AddressSpace.gmem, assumed_align=al),
                                 cutlass.Int32, cutlass.Float32, binding.stream_obj,
                                 cutlass.Float32(scale * host.LOG2_E), n_pages)
    binding.calls = tuple(m.call for m in binding.launches)
    return binding


def _launches(plan: Plan, P: dict[str, Any], ptr: Callable[..., Any], i32: Any, f32: Any, stream: Any, scale: Any,
              n_pages: int) -> list[fastcall.Marshalled]:
    """The kernels of ``plan`` with their arguments, in launch order (the three paths of a call)."""
    import cutlass

    bf, fp, it = cutlass.BFloat16, cutlass.Float32, cutlass.Int32
    kind, b, s, h, stages, dev = plan.kind, plan.b, plan.s, plan.h, plan.stages, plan.device_index
    max_blocks = plan.key[4]
    ins = (P["q"], P["kv"], P["bt"], P["lens"])
    sizes = (i32(b), i32(n_pages), i32(max_blocks), i32(plan.splits), scale)
    o, l = P["o"], P["l"]
    # an sm90 kernel also takes out, lse and a counter array; only a fused one uses them, the others get
    # out / lse / cache_seqlens as placeholders (never read or written)
    finals: tuple = (o, l, P["lens"]) if takes_finals(kind) else ()
    if plan.ws is not None:
        finals = (*finals[:2], ptr(fp, plan.ws.data_ptr(), 16))
    if plan.key[11]:  # traced: the timeline probe's buffer takes the counter argument's place
        finals = (*finals[:2], P["trace"])
    out: list[fastcall.Marshalled] = []
    if plan.path == "tail":
        # the direct grid over the full waves, then the tail grid, which merges its own pieces
        tp, sem, opart, lpart, b_first = plan.tail
        f_direct, _, rows_pad, _ = host.compiled(kind, s, h, stages, direct=True)
        finals = (o, l, ptr(it, sem.data_ptr(), 4))
        if tp.full:
            out.append(_launch(f_direct, (*ins, o, l, *finals, *sizes[:3], i32(tp.full), sizes[4], stream), dev))
        if tp.pieces:
            f_tail, _, _, _ = host.compiled(kind, s, h, stages)
            # the partials hold the tail's sequences only: their base goes back by the sequences before them
            o_at = opart.data_ptr() - b_first * host.MAX_PARTS * rows_pad * host.D_V * 4
            l_at = lpart.data_ptr() - b_first * host.MAX_PARTS * rows_pad * 4
            parts = (ptr(fp, o_at, 16), ptr(fp, l_at, 16))
            out.append(_launch(f_tail, (*ins, *parts, *finals, *sizes[:3], i32(len(tp.pieces)), sizes[4], stream),
                               dev))
    elif plan.path == "direct":
        f_main, _, _, _ = host.compiled(kind, s, h, stages, direct=True, paired=plan.paired)
        if plan.flags is not None:
            # f_main flags its poisoned tiles in a zeroed int32 per tile, which the persistent redo walks and
            # zeroes again (the counter argument's place; unused by these kinds otherwise)
            finals = (*finals[:2], ptr(it, plan.flags.data_ptr(), 4))
        args = (*ins, o, l, *finals, *sizes, stream)
        out.append(_launch(f_main, args, dev))
        redo = redo_kind(kind, one_split=not plan.paired)
        if redo:  # the exact kernel over the tiles f_main poisoned
            out.append(_launch(host.compiled(redo, s, h, stages, direct=True, paired=plan.paired)[0], args, dev))
    else:
        f_main, f_comb, _, _ = host.compiled(kind, s, h, stages, paired=plan.paired)
        opart, lpart = plan.parts
        parts = (ptr(bf if bf16_partials(kind) else fp, opart.data_ptr(), 16), ptr(fp, lpart.data_ptr(), 16))
        if plan.sem is not None:
            out.append(_launch(f_main, (*ins, *parts, o, l, ptr(it, plan.sem.data_ptr(), 4), *sizes, stream), dev))
        else:
            args = (*ins, *parts, *finals, *sizes, stream)
            out.append(_launch(f_main, args, dev))
            redo = redo_kind(kind)
            if redo:  # before the combine: it must read the recomputed partials
                out.append(_launch(host.compiled(redo, s, h, stages, paired=plan.paired)[0], args, dev))
            out.append(_launch(f_comb, (*parts, o, l, i32(b), i32(plan.slots), stream), dev))
    return out


def plan_for(key: tuple, device: Any, stream: int) -> Plan:
    """The implicit plan of ``key`` on ``stream``: built on the first call outside a capture, then reused.
    ``device``: a torch device or a CUDA device index.

    A CUDA graph capture (torch.cuda.graph warms up on a side stream, then captures on its own) reuses the
    newest plan built outside a capture for the same shape, so the captured launches use workspace that
    lives as long as the process; capturing a shape never called before is refused (nothing may be
    allocated into the graph's private pool behind the caller's back).  The cache keeps ``MAX_PLANS``
    plans, never dropping one a capture used.
    """
    full = (*key, stream)
    hit = PLANS.get(full)
    if hit is not None:
        PLANS.move_to_end(full)
        return hit
    if _capturing():
        warm = _WARM.get(key)
        if warm is None:
            raise RuntimeError("this MLA shape has no plan yet: call the version once outside the CUDA graph "
                               "capture (a warm-up, as torch.cuda.graph requires) and capture again.")
        warm.captured = True
        return warm
    if isinstance(device, int):  # the caller's device index (run_split_combine): a device object only on a miss
        import torch

        device = torch.device("cuda", device)
    plan = PLANS[full] = _WARM[key] = Plan(key, device, stream)
    while len(PLANS) > MAX_PLANS:
        old = next((k for k, p in PLANS.items() if not p.captured), None)
        if old is None:
            break
        dropped = PLANS.pop(old)
        if _WARM.get(old[:-1]) is dropped:
            del _WARM[old[:-1]]
    return plan
