"""v35_cute: v33_cute with WG0 giving page A back as soon as its P_A V_AL is done, not after P_B arrived.

In v28_cute..v33_cute WG0 issues P_A V_AL, waits on barrier S1 for WG1's P_B (WG1's page-B softmax,
~1000 cycles later), and only then waits for P_A V_AL and releases page A's stage; WG1 releases it
after its P_A V_AR. Run 12's probe of v33_cute: page A's slots come free at ~4670 cycles into the
pair, WG1's own release at ~4440. WG0 has nothing else to do before P_B arrives, so here it waits for
its P V first and releases (v26_cute's WG0 half of ``early_release``; its WG1 half assumes 64-dim
blocks and is not taken). The slot then frees when WG1 releases it.

Prediction (before the H200 run): page A's refill starts ~200 cycles sooner; if page A's reload
chain sets the pair, spec -1.5 to -3% (855-865 us); decode unchanged (its pair is the ring's data
movement).

Measured (run 12, devlog): correct; spec 868.2 / 867.9 us vs v33_cute 879.9 / 876.8 (compare / harness,
-1.3 / -1.0%), decode a tie (73.4 vs 73.6, 73.0 vs 73.0). The probe's pair did not change (6064 vs
6078 cycles): small, and only half explained. Kept as the best by measurement.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v33_cute"
DESCRIPTION = "v33_cute with WG0 releasing page A right after its P_A V_AL, before it waits for P_B"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v35_cute", "sm90_seesaw_pair_c3early", CONFIG)
