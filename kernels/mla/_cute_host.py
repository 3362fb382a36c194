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

D_QK, D_V, PAGE, BLOCK_M = 576, 512, 64, 64
LOG2_E = 1.4426950408889634
H200_SMS = 132
_CACHE: dict[tuple, Any] = {}
# extra cute.compile options, e.g. "--keep-ptx" to inspect registers with `ptxas -v`
COMPILE_OPTIONS = os.environ.get("KFORGE_CUTE_OPTIONS", "")


def check_inputs(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any) -> None:
    """Raise ValueError (one sentence) when the inputs break the MLA contract the kernel assumes."""
    import torch

    if q.dtype != torch.bfloat16 or kv_cache.dtype != torch.bfloat16:
        raise ValueError(f"q and kv_cache must be bfloat16 (got {q.dtype}, {kv_cache.dtype}); cast them first.")
    if q.dim() != 4 or q.shape[-1] != D_QK or tuple(kv_cache.shape[1:]) != (PAGE, D_QK):
        raise ValueError(
            f"expected q [b,s,h,{D_QK}] and kv_cache [n,{PAGE},{D_QK}], got {tuple(q.shape)} and "
            f"{tuple(kv_cache.shape)}; reshape to the MLA contract."
        )
    if block_table.dtype != torch.int32 or cache_seqlens.dtype != torch.int32:
        raise ValueError("block_table and cache_seqlens must be int32 tensors; convert them with .int().")


def choose_splits(work_units: int, max_pages: int, config: Mapping[str, Any]) -> int:
    """KV splits per (sequence, row block): CONFIG num_splits, or fill the SMs with the fewest splits.

    With one 216 KB CTA per SM, efficiency of n CTAs is n / (ceil(n/132)*132); we take the
    smallest split count within 5% of the best over 1..16, never more splits than pages.
    """
    fixed = int(config.get("num_splits", 0) or 0)
    sms = int(config.get("sm_count", H200_SMS))
    if fixed > 0:
        return max(1, min(fixed, max(max_pages, 1)))
    best, best_eff = 1, 0.0
    effs = []
    for sp in range(1, 17):
        if sp > max(max_pages, 1):
            break
        n = work_units * sp
        effs.append((sp, n / (math.ceil(n / sms) * sms)))
    top = max(e for _, e in effs)
    for sp, e in effs:
        if e >= top - 0.05:
            best, best_eff = sp, e
            break
    return best


def _arch() -> str:
    return os.environ.get("CUTE_DSL_ARCH", "")


def _kernel_class(kind: str) -> Any:
    if kind == "sm80":
        from kforge_kernels.mla._cute_sm80 import MlaSplitSm80

        return MlaSplitSm80
    if kind == "sm80_dedup":
        from kforge_kernels.mla._cute_sm80_dedup import MlaSplitSm80Dedup

        return MlaSplitSm80Dedup
    raise ValueError(f"unknown CuTe MLA kernel kind {kind!r}; use 'sm80' or 'sm80_dedup'.")


def compiled(kind: str, s: int, h: int, stages: int) -> tuple[Any, Any, int, int]:
    """Compile (once) the split kernel ``kind`` and the combine kernel for draft length s, h heads.

    Returns (split fn, combine fn, padded rows per sequence, 64-row blocks per sequence).
    """
    key = (kind, s, h, stages, _arch())
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    from kforge_kernels.mla._cute_combine import MlaCombine

    gm = cute.AddressSpace.gmem
    bf, f32, i32 = cutlass.BFloat16, cutlass.Float32, cutlass.Int32
    # dummy 16-byte aligned addresses: compilation only looks at types and alignment
    def p(dt):
        return make_ptr(dt, 1 << 20, gm, assumed_align=4 if dt is i32 else 16)

    main = _kernel_class(kind)(s, h, stages)
    stream = cuda.CUstream(0)
    f_main = cute.compile(
        main, p(bf), p(bf), p(i32), p(i32), p(f32), p(f32),
        i32(1), i32(1), i32(1), i32(1), f32(1.0), stream, options=COMPILE_OPTIONS,
    )
    comb = MlaCombine(s, h, main.rows_pad)
    f_comb = cute.compile(comb, p(f32), p(f32), p(bf), p(f32), i32(1), i32(1), stream, options=COMPILE_OPTIONS)
    _CACHE[key] = (f_main, f_comb, main.rows_pad, main.m_blocks)
    return _CACHE[key]


def run_split_combine(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, config, kind) -> None:
    """Launch split kernel + combine on the current torch stream, writing into out and lse."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import make_ptr

    check_inputs(q, kv_cache, block_table, cache_seqlens)
    b, s, h, _ = q.shape
    stages = int(config.get("stages", 2))
    f_main, f_comb, rows_pad, m_blocks = compiled(kind, int(s), int(h), stages)
    q = q.contiguous()
    kv_cache = kv_cache.contiguous()
    block_table = block_table.contiguous()
    cache_seqlens = cache_seqlens.contiguous()
    max_blocks = int(block_table.shape[1])
    splits = choose_splits(int(b) * m_blocks, max_blocks, config)
    dev = q.device
    opart = torch.empty(splits, b, rows_pad, D_V, dtype=torch.float32, device=dev)
    lpart = torch.empty(splits, b, rows_pad, dtype=torch.float32, device=dev)
    gm = cute.AddressSpace.gmem
    bf, f32, i32 = cutlass.BFloat16, cutlass.Float32, cutlass.Int32

    def ptr(dt, t):
        return make_ptr(dt, t.data_ptr(), gm, assumed_align=4 if dt is i32 else 16)

    stream = cuda.CUstream(torch.cuda.current_stream(dev).cuda_stream)
    f_main(
        ptr(bf, q), ptr(bf, kv_cache), ptr(i32, block_table), ptr(i32, cache_seqlens),
        ptr(f32, opart), ptr(f32, lpart),
        i32(b), i32(kv_cache.shape[0]), i32(max_blocks), i32(splits),
        f32(float(softmax_scale) * LOG2_E), stream,
    )
    if out.is_contiguous() and lse.is_contiguous() and out.data_ptr() % 16 == 0:
        f_comb(ptr(f32, opart), ptr(f32, lpart), ptr(bf, out), ptr(f32, lse), i32(b), i32(splits), stream)
    else:  # write into contiguous scratch, then copy into the caller's views
        o2, l2 = torch.empty_like(out, memory_format=torch.contiguous_format), torch.empty_like(lse)
        l2 = l2.contiguous()
        f_comb(ptr(f32, opart), ptr(f32, lpart), ptr(bf, o2), ptr(f32, l2), i32(b), i32(splits), stream)
        out.copy_(o2)
        lse.copy_(l2)
