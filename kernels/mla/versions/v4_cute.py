"""v4_cute: the CuTe DSL line on Hopper hardware -- TMA, mbarrier pipeline, wgmma, warp specialisation.

v3_cute (mma.sync from ldmatrix'd shared memory, cp.async, all 8 warps doing everything) used
none of what sm_90 adds.  v4_cute keeps its algorithm (64 folded rows per CTA, S split between
two column groups with the row maxima exchanged through shared memory, online exp2 softmax,
split-KV + combine for decode, direct out/lse for one split) and changes the machinery
(``_cute_sm90``):

* a producer warpgroup issues TMA bulk copies of Q and of each KV page (block-table lookup on
  the producer) into a 2-stage mbarrier pipeline; it hands its registers to the consumers;
* two consumer warpgroups run wgmma: S_c (m64n32, K = 576) and O_c += P V_c (m64n256, K = 64),
  all operands from 128B/64B-swizzled shared memory; V is an MN-major view of the K tile's bytes;
* page j+1's QK^T and page j's PV are in flight together while the softmax of page j+1 runs
  (FA3-style intra-warpgroup overlap).

Prediction (before the H200 run): tensor pipe busy ~70% (from 45-51% for v3); decode main kernel
~65-75 us + the fp32 combine ~10 us => 75-85 us (v3: 106.8 us); spec 950-1100 us (v3: 1240.6 us).
Risk: the m64n32 QK^T reads Q (2 KB) + K (1 KB) from shared memory per 64x32x16 step, 1.5x the
bytes/clock the tensor core consumes, so QK^T is shared-memory bound (the ceiling is ~80%).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kforge_kernels.mla.cute.host import SM90_FEATURES

LANGUAGE = "cute-dsl"
PARENT = "v3_cute"
DESCRIPTION = "CuTe DSL sm90: TMA + mbarrier pipeline, wgmma QK^T/PV, producer/consumer warpgroups, QK/PV overlap"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SM90_FEATURES + ("softmax-mma-overlap",)
CONFIG: dict[str, Any] = {
    # KV splits per (sequence, 64-row block); 0 = pick the fewest that fill 132 SMs
    "num_splits": 0,
    # Q 72 KB + 2 pages 144 KB + P 8 KB = 226 KB of the 227 KB a CTA may use
    "stages": 2,
    "sm_count": 132,
}


def supports(params: Mapping[str, int]) -> str | None:
    """Covers the whole contract: any h (rows are padded to 64), s >= 1, any lengths >= s."""
    return None


def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None) -> None:
    """Compile, without launching, what ``run`` needs for ``params`` (warm-up off the GPU)."""
    from kforge_kernels.mla.cute.host import prepare_version

    prepare_version("sm90", CONFIG, params, config)


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    from kforge_kernels.mla.cute.host import run_version

    return run_version("v4_cute", "sm90", CONFIG, q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, config)
