"""v17_cute: v16_cute with WG0's P_B V_BL and next S_A issued only after WG1 has issued P_A V_AR.

v15_cute/v16_cute measured slower than v12_cute on the H200 (94.4 / 1110 vs 81.1 / 951 us,
same call).  Their SASS has the intended shape (no serialised rs-wgmma, 168 registers), so the
suspect is the tensor pipe's order: WG0 queues S_A(k+1)'s first 20 k-steps right behind its
P_B V_BL, often before WG1 has issued P_A V_AR, so WG1's P_A V_AR -- whose completion frees
A4-7 and lets WG1 issue S_B(k+1), the next pair's critical path -- waits behind them.  FlashMLA
orders the same two issues with a named barrier; so does this version (one arrive, one sync).

Prediction (before the H200 run): if the queue order is the cause, spec 1110 -> 900-950 us and
decode 93 -> 78-84 us; if it is not, within 3% of v16_cute and the cause is elsewhere (the
B-page turnover through the load latency, which this schedule shares with v12_cute).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v16_cute"
DESCRIPTION = "v16_cute with P_B V_BL / next S_A issued after WG1's P_A V_AR (named barrier)"
FEATURES = EVICT_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v17_cute", "sm90_stagger_ordered", CONFIG)
