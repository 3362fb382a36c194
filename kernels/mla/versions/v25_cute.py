"""v25_cute: v23_cute with warpgroup 1's softmax ahead of its P V wgmmas (see ``_cute_seesaw_soft1``).

Found with the timeline probe (``_cute_trace``): in v19_cute/v23_cute's pair, WG1's issue of
P_A V_AR blocks behind WG0's P_A V_AL for ~600 cycles, and page B's softmax -- which both P_B V
GEMMs wait for -- runs only after it.  Here WG1 runs that softmax first, then queues P_A V_AR and
P_B V_BR together from registers (P_A read back from shared memory, already moved to max m1).

Prediction (before the H200 run): spec 936 -> 830-870 us, decode 75.5 -> 67-71 us.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v23_cute"
DESCRIPTION = "v23_cute with WG1's softmax before its P V (both P V from registers, P_A moved to m1)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v25_cute", "sm90_seesaw_pair_soft1", CONFIG)
