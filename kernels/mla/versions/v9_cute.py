"""v9_cute: v8_cute with each KV page loaded as nine 64 x 64 TMA blocks, each with its own mbarrier.

With two stages and the seesaw schedule, page B of pair k can be loaded only once both warpgroups
have finished P_B V_B of pair k-1, i.e. at the very end of that pair; v8_cute's WG1 then waits for
the whole 72 KB page before its S_B can start.  v9_cute gives every 64-dim block of a page its own
full/empty barrier pair (18 pipeline stages of 8 KB instead of 2 of 72 KB): S starts when the
first block lands and issues each block's four k-steps as soon as that block is there, so the load
overlaps the GEMM that consumes it (FlashMLA's deep-dive describes the same block-wise wait).
Each warpgroup's P V waits only for the four blocks of its V half.

Prediction (before the H200 run): the exposed part of page B's load shrinks from (load - S_A) to
about one block's latency per pair: spec 982 -> 880-930 us, decode main kernel a few us faster
(decode 88 -> 83-86 us).  No change would mean the loads were already hidden and the remaining gap
is softmax/barrier latency.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v8_cute"
DESCRIPTION = "v8_cute with 64x64-block TMA loads, one mbarrier each: S starts on a page's first block"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v9_cute", "sm90_seesaw_chunked", CONFIG)
