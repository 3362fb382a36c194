"""v28_cute: v23_cute with O leaving through shared memory and one TMA store per warpgroup.

The timeline probe (devlog run 10) put spec's epilogue at ~8100 SM cycles per CTA, ~4% of a
CTA's life: each thread wrote its 64 bf16 pairs of O straight from the wgmma accumulator layout,
4-byte stores that fill only half of each 32-byte sector (a warp covers 8 rows x 16 bytes).
Here each warpgroup writes its bf16 half of O (64 x 256) into Q's buffer -- free once the last S
GEMM is done -- in the 128B-swizzled layout (conflict-free 4-byte shared stores), and one warp
issues a single TMA store of the half: full lines, no per-row predicates (TMA clips the rows
past the last).  Decode's pair merge ends in the same store (its final bf16 output).

Prediction (before the H200 run): spec epilogue ~8100 -> ~3000 cycles per CTA, spec -2 to -3%
(943 -> 915-925 us); decode -0.5 to -1.5% (the merge's store is half of its 32 KB per CTA).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v23_cute"
DESCRIPTION = "v23_cute with O staged in shared memory and written by one TMA store per warpgroup"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v28_cute", "sm90_seesaw_pair_tmao", CONFIG)
