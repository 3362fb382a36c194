"""Host side of the CuTe DSL MLA versions: compile cache, split heuristic, launch.

Kernels take raw pointers plus Int32 sizes (not DLPack tensors): the call costs no DLPack
conversion, and batch, page count and block-table width are runtime values, so only
(s, h, kernel config, arch) trigger a compile.  ``cute.compile`` runs once per key and the
compiled function is kept in ``_CACHE`` for the life of the process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from kforge_kernels._shared.cute_fastcall import stream_getter
from kforge_kernels.mla.cute.kinds import (KINDS, bf16_partials, combine_class, fused, kernel_class, pair_exchange_global,
                                            redo_kind, redo_only, shape_kind, tail_balanced, takes_finals)
from kforge_kernels.mla.cute.tail_plan import MAX_PARTS, TailPlan, plan_tail

D_QK, D_V, PAGE, BLOCK_M = 576, 512, 64, 64
LOG2_E = 1.4426950408889634
H200_SMS = 132
_CACHE: dict[tuple, Any] = {}
#: a tail-balanced kind's per-shape state (``_tail_state``)
_TAIL: dict[tuple, Any] = {}
#: the stale-max versions' per-tile redo flags, per (device, stream) (``_redo_flags``)
_REDO_FLAGS: dict[tuple[str, int], Any] = {}
# extra cute.compile options, e.g. "--keep-ptx" to inspect registers with `ptxas -v`
COMPILE_OPTIONS = os.environ.get("KFORGE_CUTE_OPTIONS", "")


def check_inputs(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any) -> tuple[Any, Any]:
    """Raise ValueError (one sentence) when the inputs break the MLA contract the kernel assumes; else return q's and
    kv_cache's shapes (run_split_combine reads them once, here)."""
    # identity tests and torch.Size == tuple: this runs on every call (host time, see run_split_combine)
    bf16, i32 = _DTYPES or _dtypes()
    if q.dtype is not bf16 or kv_cache.dtype is not bf16:
        raise ValueError(f"q and kv_cache must be bfloat16 (got {q.dtype}, {kv_cache.dtype}); cast them first.")
    qs, ks = q.shape, kv_cache.shape
    if len(qs) != 4 or qs[3] != D_QK or len(ks) != 3 or ks[1] != PAGE or ks[2] != D_QK:
        raise ValueError(
            f"expected q [b,s,h,{D_QK}] and kv_cache [n,{PAGE},{D_QK}], got {tuple(q.shape)} and "
            f"{tuple(kv_cache.shape)}; reshape to the MLA contract."
        )
    if block_table.dtype is not i32 or cache_seqlens.dtype is not i32:
        raise ValueError("block_table and cache_seqlens must be int32 tensors; convert them with .int().")
    return qs, ks


#: torch.bfloat16 and torch.int32, resolved on the first call (this module imports without torch)
_DTYPES: tuple[Any, Any] | None = None


def _dtypes() -> tuple[Any, Any]:
    global _DTYPES
    import torch

    _DTYPES = (torch.bfloat16, torch.int32)
    return _DTYPES


#: the split cap of :func:`choose_splits` when a CONFIG names none (every version up to v63_cute)
DEFAULT_MAX_SPLITS = 16


def choose_splits(work_units: int, max_pages: int, config: Mapping[str, Any]) -> int:
    """KV splits per (sequence, row block): CONFIG num_splits, or fill the SMs with the fewest splits.

    With one 216 KB CTA per SM, efficiency of n CTAs is n / (ceil(n/132)*132); we take the
    smallest split count within 5% of the best over 1..CONFIG max_splits (default 16), never more splits than
    pages.  The cap only binds on tiny grids (b * row blocks <= 7 at 16: serve_b1's 2 row blocks get 28 CTAs).
    """
    fixed = int(config.get("num_splits", 0) or 0)
    sms = int(config.get("sm_count", H200_SMS))
    if fixed > 0:
        return max(1, min(fixed, max(max_pages, 1)))
    cap = int(config.get("max_splits", DEFAULT_MAX_SPLITS) or DEFAULT_MAX_SPLITS)
    effs = []
    for sp in range(1, min(cap, max(max_pages, 1)) + 1):
        n = work_units * sp
        effs.append((sp, n / (math.ceil(n / sms) * sms)))
    top = max(e for _, e in effs)
    sp = next(sp for sp, e in effs if e >= top - 0.05)
    if cap <= DEFAULT_MAX_SPLITS:  # the measured versions' plans, unchanged (a frozen version's host must not move)
        return sp
    # a raised cap (v64_cute on): the fewest splits with the same pages per CTA, so no split is left without pages
    # (b1's 61 splits of 3 pages over 128 pages are 43): the grid and the combine's partials shrink, each CTA's work
    # is unchanged
    chunk = math.ceil(max(max_pages, 1) / sp)
    return math.ceil(max(max_pages, 1) / chunk)


def _arch() -> str:
    return os.environ.get("CUTE_DSL_ARCH", "")


def _runs_tail(kind: str, paired: bool) -> bool:
    """Whether ``kind``'s one-split (unpaired) shapes run as a direct grid plus a tail grid (``_cute_seesaw_tail``):
    its unpaired non-direct kernel is then the tail grid, which merges its own pieces (no combine kernel)."""
    return tail_balanced(kind) and not paired


def split_plan(kind: str, splits: int) -> tuple[int, int, bool]:
    """(CTAs per row block along the KV, partials they leave, paired) for ``splits`` chosen splits.

    A pairing kind (v22_cute) rounds 2+ splits up to an even count and merges each pair in a
    2-CTA cluster, so 2 splits leave one result (written directly) and 2k leave k partials.
    """
    if kind.startswith("sm90_seesaw_pair") and splits > 1:
        splits += splits % 2
        return splits, splits // 2, True
    return splits, splits, False


#: fp32 words of a pairing kernel's global exchange per (pair, receiving rank): 128 threads x (128 O + 2 lse)
PAIR_EXCHANGE_WORDS = 128 * 130


def compiled(kind: str, s: int, h: int, stages: int, direct: bool = False,
             paired: bool = False) -> tuple[Any, Any, int, int]:
    """Compile (once) the split kernel ``kind`` (+ the combine kernel unless ``direct``).

    ``paired``: the variant whose splits merge in pairs (see :func:`split_plan`).

    Returns (split fn, combine fn or None, padded rows per sequence, 64-row blocks per sequence).
    """
    if direct and kind == "sm80":
        raise ValueError("kernel kind 'sm80' has no direct (single-split) epilogue; use 'sm80_dedup' or an sm90 kind.")
    key = (kind, s, h, stages, direct, _arch()) + (("paired",) if paired else ())
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    bf, f32, i32 = cutlass.BFloat16, cutlass.Float32, cutlass.Int32

    def p(dt, align=16):  # dummy address: compilation only looks at types and alignment
        return make_ptr(dt, 1 << 20, cute.AddressSpace.gmem, assumed_align=align)

    main = kernel_class(kind)(s, h, stages, direct, *((True,) if paired else ()))
    stream = cuda.CUstream(0)
    pdt = bf if bf16_partials(kind) else f32
    # sm90 kinds also take the final out / lse and the split counters (used when fused)
    finals = (p(bf), p(f32, 4), p(f32, 16) if pair_exchange_global(kind) else p(i32, 4)) if takes_finals(kind) else ()
    f_main = cute.compile(
        main, p(bf), p(bf), p(i32, 4), p(i32, 4), p(bf if direct else pdt), p(f32, 4 if direct else 16), *finals,
        i32(1), i32(1), i32(1), i32(1), f32(1.0), stream, options=COMPILE_OPTIONS,
    )
    f_comb = None
    if not direct and not fused(kind) and not _runs_tail(kind, paired) and not redo_only(kind):  # a redo: no combine
        comb = combine_class(kind)(s, h, main.rows_pad)
        f_comb = cute.compile(comb, p(pdt), p(f32), p(bf), p(f32, 4), i32(1), i32(1), stream, options=COMPILE_OPTIONS)
    _CACHE[key] = (f_main, f_comb, main.rows_pad, main.m_blocks)
    return _CACHE[key]


def prepare(kind: str, params: Mapping[str, int], config: Mapping[str, Any], allow_direct: bool = False) -> None:
    """Compile (no GPU needed) every kernel ``run_split_combine`` would launch for ``params``.

    Uses the same split decision as a call whose block table is ceil(t/64) pages wide.
    """
    b, s, h, t = (int(params[k]) for k in ("b", "s", "h", "t"))
    stages = int(config.get("stages", 2))
    splits = choose_splits(b * math.ceil(s * h / BLOCK_M), math.ceil(t / PAGE), config)
    _, slots, paired = split_plan(kind, splits)
    direct = allow_direct and slots == 1
    kind = shape_kind(kind, one_split=direct and not paired)
    compiled(kind, s, h, stages, direct=direct, paired=paired)
    redo = redo_kind(kind, one_split=direct and not paired)
    if redo:
        compiled(redo, s, h, stages, direct=direct, paired=paired)
    if direct and _runs_tail(kind, paired):
        compiled(kind, s, h, stages)  # its tail grid (_cute_seesaw_tail)


def config_key(config: Mapping[str, Any]) -> tuple[int, int, int, float, int]:
    """The part of a plan's key that ``config`` decides: (stages, num_splits, sm_count, tail_edge_pages,
    max_splits)."""
    return (int(config.get("stages", 2)), int(config.get("num_splits", 0) or 0), int(config.get("sm_count", H200_SMS)),
            float(config.get("tail_edge_pages", 3.0)),
            int(config.get("max_splits", DEFAULT_MAX_SPLITS) or DEFAULT_MAX_SPLITS))


#: the redo kinds (``kinds.redo_only``), as a set for the per-call test
_REDO_ONLY = frozenset(k for k in KINDS if redo_only(k))


def _check_kind(kind: str) -> None:
    """Refuse a redo kind (``kinds.redo_only``) as a call's own kernel, in one sentence."""
    if kind in _REDO_ONLY:
        raise ValueError(f"kernel kind {kind!r} only runs behind its stale-max kind; run "
                         f"'sm90_seesaw_pair_stale_redo' (v57_cute) instead.")


def run_split_combine(
    q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, config, kind, allow_direct=False,
    trace_buf=None, *, cfg_key: tuple | None = None,
) -> None:
    """Launch the split kernel (+ combine) on the current torch stream, writing into out and lse.

    ``allow_direct``: when the heuristic picks one split, run the variant that writes ``out``
    and ``lse`` itself (no fp32 workspace, no combine launch).  ``trace_buf``: an int32 tensor of
    ``TRACE_PER_CTA`` words per CTA for a ``*_trace`` kind's timeline probe (``_cute_trace``).

    The split decision, the kernels, the workspace and the marshalled launch arguments are the
    shape's plan (``_cute_plan``), made on the first call; a later call of the shape writes six
    addresses and launches: no allocation, no memset (but a fused kind's counters), no host sync.
    ``cfg_key``: :func:`config_key` of ``config`` when the caller has it already (a version's own CONFIG).
    A version's ``run`` calls :func:`launch_split_combine` directly (its kind is checked once).
    """
    _check_kind(kind)
    launch_split_combine(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, kind,
                         cfg_key or config_key(config), bool(allow_direct), trace_buf)


def launch_split_combine(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, kind: str,
                         cfg_key: tuple, allow_direct: bool, trace_buf: Any) -> None:
    """:func:`run_split_combine` past its kind check, with the plan-key part of the config resolved: the per-call path.

    Every line here runs on every decode step, so it is host time (issue 35: under 10 us per call): positional
    arguments, one contiguity test per tensor (a copy only for a tensor that fails it), each address read once, the
    device as an index, the plan looked up before anything else is built, the addresses as a tuple.
    """
    qs, ks = check_inputs(q, kv_cache, block_table, cache_seqlens)
    if not (q.is_contiguous() and kv_cache.is_contiguous() and block_table.is_contiguous()
            and cache_seqlens.is_contiguous()):
        q, kv_cache = q.contiguous(), kv_cache.contiguous()
        block_table, cache_seqlens = block_table.contiguous(), cache_seqlens.contiguous()
    # cp.async / TMA move 16-byte chunks: an unaligned view (rare) gets an aligned copy
    qa, kva = q.data_ptr(), kv_cache.data_ptr()
    if qa % 16:
        q = q.clone()
        qa = q.data_ptr()
    if kva % 16:
        kv_cache = kv_cache.clone()
        kva = kv_cache.data_ptr()
    dev = q.get_device()
    if dev < 0:
        raise ValueError("q, kv_cache, block_table and cache_seqlens must be CUDA tensors (q is on the CPU); move them "
                         "to the GPU first.")
    stream = stream_getter()(dev)
    full = (kind, qs[0], qs[1], qs[2], block_table.shape[1], *cfg_key, allow_direct, trace_buf is not None, dev,
            stream)
    plan = _plan.PLANS.get(full)  # plan_for's hit path, inline
    if plan is None:
        plan = _plan.plan_for(full[:-1], dev, stream)
    else:
        _plan.PLANS.move_to_end(full)
    # out/lse views we cannot address as dense [b, s*h, 512] / [b, h, s]: the plan's scratch, then a copy
    oa, la = out.data_ptr(), lse.data_ptr()
    dense = oa % 16 == 0 and la % 4 == 0 and out.is_contiguous() and lse.is_contiguous()
    if not dense:
        o_dst, l_dst = plan.scratch_for(out, lse)
        oa, la = o_dst.data_ptr(), l_dst.data_ptr()
    addrs = (qa, kva, block_table.data_ptr(), cache_seqlens.data_ptr(), oa, la)
    if trace_buf is not None:
        addrs += (trace_buf.data_ptr(),)
    plan.launch(addrs, stream, float(softmax_scale), ks[0])
    if not dense:
        out.copy_(o_dst)
        lse.copy_(l_dst)


def reset_redo_flags() -> None:
    """Zero every device's redo flags (a test that ran the stale-max kernel without its redo leaves some set)."""
    for flags in _REDO_FLAGS.values():
        flags.zero_()


def redo_flag_tensors() -> list[Any]:
    """Every redo-flag tensor allocated so far (tests check they are all zero after a call)."""
    return list(_REDO_FLAGS.values())


def _redo_flags(n_tiles: int, dev: Any, stream: int = 0) -> Any:
    """v57_cute's per-tile redo flags for ``stream`` on ``dev``: zeroed once, then kept zero by the redo kernel (it
    zeroes each flag it takes), so a call costs no memset.  One set per stream: a redo on another stream could
    take a flag this stream's kernel just set."""
    import torch

    key = (str(dev), stream)
    hit = _REDO_FLAGS.get(key)
    if hit is None or hit.numel() < n_tiles:
        hit = _REDO_FLAGS[key] = torch.zeros(max(n_tiles, 1024), dtype=torch.int32, device=dev)
    return hit


def tail_buffers(plan: TailPlan, b: int, m_blocks: int, rows_pad: int, dev: Any) -> tuple[TailPlan, Any, Any, Any, int]:
    """The device state of ``plan``: (plan, int32 zeroed counters + its work table, fp32 partials, their lse, first
    sequence with a tail tile).  The kernel reads the table, so a different plan needs its own state."""
    import torch

    sem = torch.tensor([0] * (b * m_blocks) + plan.table(m_blocks), dtype=torch.int32, device=dev)
    b_first = plan.full // m_blocks
    tail_b = b - b_first
    opart = torch.empty(tail_b * MAX_PARTS * rows_pad * D_V, dtype=torch.float32, device=dev)
    lpart = torch.empty(tail_b * MAX_PARTS * rows_pad, dtype=torch.float32, device=dev)
    return plan, sem, opart, lpart, b_first


def _tail_state(kind: str, b: int, m_blocks: int, rows_pad: int, pages: int, dev: Any,
                edge_pages: float) -> tuple[TailPlan, Any, Any, Any, int]:
    """:func:`tail_buffers` of the shape's plan, kept for the process: the plan depends on the shape only (a
    shorter sequence's pages are clamped in the kernel), and the kernel resets each counter after its tile's
    merge.  One stream at a time may use a shape's state.
    """
    key = (kind, b, m_blocks, pages, str(dev), edge_pages)
    hit = _TAIL.get(key)
    if hit is None:
        hit = _TAIL[key] = tail_buffers(plan_tail(b * m_blocks, pages, H200_SMS, edge_pages), b, m_blocks, rows_pad,
                                        dev)
    return hit


def prepare_version(kind: str, defaults: Mapping[str, Any], params: Mapping[str, int],
                    config: Mapping[str, Any] | None) -> None:
    """A version's ``prepare``: its CONFIG overlaid with ``config``, then :func:`prepare` (direct allowed)."""
    prepare(kind, params, {**defaults, **(config or {})}, allow_direct=True)


def run_version(name: str, kind: str, defaults: Mapping[str, Any], q, kv_cache, block_table, cache_seqlens,
                softmax_scale, out, lse, config: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """A 2-stage version's ``run`` as one call (v4_cute, v6_cute and other early versions): the ``run`` that
    :func:`version_functions` builds for (``name``, ``kind``, ``defaults``), made once and kept, so its config memo
    lives across calls as in every later version."""
    key = (name, kind, id(defaults))
    run = _RUNS.get(key)
    if run is None:
        run = _RUNS[key] = version_functions(name, kind, defaults)[2]
    return run(q, kv_cache, block_table, cache_seqlens, softmax_scale, out=out, lse=lse, config=config)


#: the ``run`` of each (name, kind, defaults) that :func:`run_version` was called with
_RUNS: dict[tuple[str, str, int], Any] = {}


def _version_config(name: str, kind: str, defaults: Mapping[str, Any],
                    config: Mapping[str, Any] | None) -> tuple[Any, dict | None, dict | None, tuple]:
    """The memo a version's ``run`` keeps for ``config`` over its ``defaults``: ``(config, config's copy, defaults'
    copy or None, the merged config's plan-key part)``, with ``stages`` and the kind checked.

    A call passes the same long-lived mapping every time (``Version``'s read-only view of its config), so ``run``
    reuses the memo while ``config`` is the same object and equals its copy; the defaults' copy is kept (and
    compared) only when ``config`` lacks one of their keys, since otherwise ``config`` decides every value.  An edit
    in place of either is thus seen at the next call, for one ~0.1 us compare per call instead of a merge and a key.
    """
    _check_kind(kind)
    cfg = {**defaults, **config} if config else dict(defaults)
    if int(cfg["stages"]) != 2:
        raise ValueError(
            f"{name} supports stages=2 only (got {cfg['stages']}); Q, P and 3 pages exceed 227 KB of shared memory."
        )
    covers = config is not None and defaults.keys() <= config.keys()
    return (config, None if config is None else dict(config), None if covers else dict(defaults), config_key(cfg))


#: a memo no config matches (a version's ``run`` before its first call)
_NO_MEMO: tuple[Any, dict | None, dict | None, tuple] = (object(), None, None, ())


#: knowledge-base entries every sm90 CuTe version applies; a version's FEATURES adds its own
SM90_FEATURES = (
    "tma-mbarrier-pipeline", "warp-specialization-producer-consumer", "wgmma-over-mma-sync", "split-kv-combine",
    "online-softmax-lse-combine", "o-accumulator-two-warpgroups", "latent-kv-single-load", "fold-queries-into-mma-m",
    "exp2-folded-scale", "compile-once-dynamic-sizes",
)
#: ... and every seesaw version (v8_cute on)
SEESAW_FEATURES = SM90_FEATURES + ("softmax-mma-overlap", "release-stage-before-next-gemm")

#: ... and every seesaw version whose own P V reads registers (v15_cute on; v16/v17/v19/v20 add tma-evict-first)
OWNP_FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers", "warp-per-row-combine", "p-operand-from-registers")
EVICT_FEATURES = OWNP_FEATURES + ("tma-evict-first",)

#: CONFIG of the seesaw versions (v8_cute..v16_cute); a version copies it, the orchestrator may change the copy
SEESAW_CONFIG: dict[str, Any] = {
    # KV splits per (sequence, 64-row block); 0 = pick the fewest that fill 132 SMs
    "num_splits": 0,
    # Q 72 KB + 2 pages 144 KB (P lives in each page's RoPE block) of the 227 KB a CTA may use
    "stages": 2,
    "sm_count": 132,
}


def version_functions(name: str, kind: str, defaults: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The ``supports`` / ``prepare`` / ``run`` of a 2-stage CuTe MLA version over kernel ``kind``.

    One closure trio per version module (the trust plugin wraps each module's ``run`` on its own).
    """

    def supports(params: Mapping[str, int]) -> str | None:
        """Covers the whole contract: any h (rows are padded to 64), s >= 1, any lengths >= s."""
        return None

    def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None) -> None:
        """Compile, without launching, what ``run`` needs for ``params`` (warm-up off the GPU)."""
        prepare_version(kind, defaults, params, config)

    memo = [_NO_MEMO]

    def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
        # run_version, inlined: this runs on every public call (host time, issue 35)
        m = memo[0]
        if m[0] is not config or m[1] != config or (m[2] is not None and m[2] != defaults):
            m = memo[0] = _version_config(name, kind, defaults, config)
        launch_split_combine(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, kind, m[3], True, None)
        return out, lse

    for fn in (supports, prepare, run):
        fn.__qualname__ = f"{name}.{fn.__name__}"
    return supports, prepare, run


# the plan module imports this one: bound last, once everything it reads here is defined (a `from` import inside
# run_split_combine cost ~1 us per call)
from kforge_kernels.mla.cute import plan as _plan  # noqa: E402
