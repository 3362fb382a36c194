"""v11_cute: v9_cute with each warpgroup's next GEMM queued before its previous one completes.

In v9_cute both warpgroups leave gaps in their wgmma queues: WG0 waits for P_B V_BL to finish
(to release page B at once) before it issues the next pair's S_A, and WG1 waits for S_B to finish
before it issues P_A V_AR.  Neither wait is needed for correctness: the next S_A reads page A,
which was released and reloaded half a pair earlier, and P_A V_AR does not touch S_B's
accumulators.  v11_cute queues S_A right behind P_B V_BL and releases page B when
``wait_group(1)`` says P_B V_BL is done; WG1 queues P_A V_AR behind S_B and waits for S_B alone
before its softmax.  Page B is released at the same moment as before, so the load pattern is
unchanged; what goes is the issue latency of a 36-wgmma chain after each wait (several hundred
cycles on an SM whose other warpgroup may have nothing queued then).

Prediction (before the H200 run): spec 960 -> 920-950 us, decode 83 -> 80-83 us; no change
would mean the other warpgroup's queue already covered those gaps.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v9_cute"
DESCRIPTION = "v9_cute with each warpgroup's next GEMM queued before the previous completes (S_A behind P_B V, P_A V behind S_B)"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v11_cute", "sm90_seesaw_early", CONFIG)
