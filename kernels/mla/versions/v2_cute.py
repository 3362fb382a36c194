"""v2_cute: v1_cute without the duplicated QK^T (S split across the two 4-warp column groups).

Each column group computes S for 32 of the page's 64 keys; row maxima and row sums are
exchanged between partner threads through shared memory and P (bf16) is published in a
swizzled 64x64 shared tile that both groups read as the A operand of O = P V.  Tensor work per
KV row drops from 2*576+512 to 576+512 MACs per query row (-35%); one end-of-page barrier is
replaced by two exchange barriers, and the next page's prefetch is issued right after the
page-landed barrier.  Host side, split heuristic and combine are v1_cute's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LANGUAGE = "cute-dsl"
PARENT = "v1_cute"
DESCRIPTION = "v1_cute with QK^T split across column groups (no duplicated S), P via shared memory"
CONFIG: dict[str, Any] = {
    # KV splits per (sequence, 64-row block); 0 = pick the fewest that fill 132 SMs
    "num_splits": 0,
    # shared-memory pages in flight (Q 72 KB + 2 pages 144 KB + P 8 KB leaves no room for a third)
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
    _prepare("sm80_dedup", params, cfg, allow_direct=False)


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    cfg = dict(CONFIG)
    cfg.update(config or {})
    if int(cfg["stages"]) != 2:
        raise ValueError(
            f"v2_cute supports stages=2 only (got {cfg['stages']}); Q, P and 3 pages exceed 227 KB of shared memory."
        )
    from kforge_kernels.mla.cute.host import run_split_combine

    run_split_combine(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, cfg, "sm80_dedup")
    return out, lse
