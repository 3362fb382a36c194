"""v8_cute: v5_cute's CTA with the "seesaw" schedule -- each consumer warpgroup computes the whole S of one page.

v5_cute's H200 profile (decode main kernel 83.7 us, tensor pipe 50-52%) left two costs in each
page: the QK^T split by tokens between the warpgroups (m64n32 wgmma, whose A and B operands
come from shared memory at ~1.5x what the tensor core consumes) and ~0.5 us of softmax and max
exchange during which neither warpgroup had tensor work queued.  v8_cute takes the pages in
pairs: WG0 computes S of page A (m64n64, balanced smem traffic) while WG1 computes S of page B;
WG0's softmax overlaps WG1's QK^T, WG1's softmax overlaps both P_A V GEMMs.  Only row maxima
cross between the warpgroups; P of each page is written into that page's RoPE block, so the
shared-memory plan is v5_cute's (see ``_cute_seesaw`` for the schedule and why it is exact).

Prediction (before the H200 run): per page the tensor time drops from ~2750 to ~2180 cycles
(QK^T no longer smem-bound) and most of the exposed softmax disappears; the 2-stage pipeline
now releases page B at the very end of a pair, so its load is exposed unless it completes within
S_A (~0.6 us).  Decode main kernel 83.7 -> 55-65 us (decode 96.4 -> 65-75 us with the combine),
spec 1202 -> 850-950 us.  A miss on spec with a high "long scoreboard / barrier" stall share
would point at that exposed load (next: 64-dim TMA chunks with their own barriers).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v5_cute"
DESCRIPTION = "seesaw schedule: each consumer warpgroup computes a whole page's S (m64n64), softmax of one WG overlaps the other's GEMMs"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v8_cute", "sm90_seesaw", CONFIG)
