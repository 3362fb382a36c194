"""v26_cute: v23_cute with every KV block given back at each warpgroup's last use of it.

The timeline probe (``_cute_trace``, devlog run 9) showed page A's stage coming free only at
~4,800 cycles into a ~6,300-cycle pair (WG0 released it after barrier S1, i.e. after WG1's whole
page-B softmax, though its P_A V_AL was done ~1,200 cycles earlier) and the next S_B pacing on
page B's reload.  Two facts of the schedule were left unused: WG0 waits idle for P_B anyway, and
WG1 never reads a page's V_L blocks (0-3) after its S.  So here WG0 waits for P_A V_AL and gives
page A back *before* the barrier, and WG1 gives back the V_L blocks of page A at once and of page
B right after S_B -- each V_L block refills as soon as WG0's P V is done with it.

Prediction (before the H200 run): spec and decode -3 to -6% (the S phase of a pair, ~2,800
cycles for 2,304 of tensor work, shrinks when page B's first blocks land ~500 cycles sooner).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v23_cute"
DESCRIPTION = "v23_cute with KV blocks released at each warpgroup's last use (page A before barrier S1)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v26_cute", "sm90_seesaw_pair_early", CONFIG)
