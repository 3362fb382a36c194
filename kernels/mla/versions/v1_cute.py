"""v1_cute: CuTe DSL MLA decode with sm80-style tensor cores (mma.sync bf16, fp32 accumulate).

One CTA per (64 folded query rows, sequence, KV split); 64-row KV pages gathered through the
block table with cp.async into a double-buffered, 128B-swizzled shared-memory ring; online
softmax in fp32 with the causal draft-window mask; split-KV partials merged by a small CuTe
combine kernel.  Design notes and predictions: /work/notes/cute.md (mirrored in the devlog).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LANGUAGE = "cute-dsl"
PARENT = "v0"
DESCRIPTION = "CuTe DSL mma.sync + cp.async paged MLA, 64 folded rows/CTA, split-KV + combine"
CONFIG: dict[str, Any] = {
    # KV splits per (sequence, 64-row block); 0 = pick the fewest that fill 132 SMs
    "num_splits": 0,
    # shared-memory pages in flight (2 = double buffer; 3 does not fit next to Q in 227 KB)
    "stages": 2,
    "sm_count": 132,
}


def supports(params: Mapping[str, int]) -> str | None:
    """Covers the whole contract: any h (rows are padded to 64), s >= 1, any lengths >= s."""
    return None


def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None) -> None:
    """Compile, without launching, what ``run`` needs for ``params`` (warm-up off the GPU)."""
    from kforge_kernels.mla.cute.host import prepare as _prepare

    cfg = dict(CONFIG)
    cfg.update(config or {})
    _prepare("sm80", params, cfg, allow_direct=False)


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    cfg = dict(CONFIG)
    cfg.update(config or {})
    if int(cfg["stages"]) != 2:
        raise ValueError(
            f"v1_cute supports stages=2 only (got {cfg['stages']}); Q plus 3 pages exceed 227 KB of shared memory."
        )
    from kforge_kernels.mla.cute.host import run_split_combine

    run_split_combine(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, cfg, "sm80")
    return out, lse
