"""v44_cute: v35_cute with warpgroup 1's page-B chain first: its softmax waits for m0 alone, it issues P_B V_BR
before P_A V_AR and rescales O_R once per pair, and WG0 scales P_A to m1 before storing it (``_cute_seesaw_bfirst``).

Run 15's probes (v35_cute and v39..v43_cute) put the spec pair (~6,070 cycles) on WG1's chain: S_B done at
2,477 -> S0 (m0 and P_A) 2,769 -> adopt m0, rescale O_R, P_A V_AR issued 3,275 -> softmax B done 4,063 -> P_B
published 4,351; the handoff changes that kept this order (v40..v43_cute) moved nothing or made it longer.
This is the order FlashMLA's sm90 kernel uses (run 15 measured its spec kernels at 831 us against our 866.6).

Prediction (written before any GPU run; compile-checked only: 168 registers, no spills, the trial kernels'
wgmma not serialised and v35_cute's six wgmma waits in their SASS; the partial-output kernel of fuzz shapes
such as s=5, h=32 is serialised by ptxas (C7520), which costs those shapes time, not correctness): WG1's softmax B starts at ~2,480 instead of ~3,280, P_B is published
~800 cycles sooner, and the pair shortens to where the tensor pipe or the two-page ring sets it: spec -3 to -8%
(800-840 us), decode -0 to -3%. A smaller gain would mean the ring (page B comes free only after both its
P V GEMMs) or the softmax beside P_A V_AL now sets the pair; the probe kind ``sm90_seesaw_pair_bfirst_trace``
shows which.

Measured (run 16, devlog): correct (self-check: trials + 7 fuzz shapes; harness 5 passed), and slower:
spec 980.4 / 983.7 us vs v35_cute 867.9 / 868.4 (compare / harness, +13%), decode 79.8 / 79.8 vs 72.5 / 72.5
(+10%). Prediction missed in sign. The probe (pair 6,621 vs 6,066 cycles) shows why: WG0 now stores P_A only
after it has m1, and m1 comes out of WG1's softmax B, which itself waited for m0 -- so P_A is published at
5,336 cycles instead of 2,652 and WG1's P_A V_AR is issued at 5,941 instead of 3,274. The two softmaxes and the
P_A store are now one chain across both warpgroups, and page A (read last) reaches the producer ~2,300 cycles
later (next pair's first A slot at 6,865 vs 4,595). Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with WG1's page-B softmax on m0 alone, P_B V_BR before P_A V_AR, P_A scaled to m1 by WG0"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v44_cute", "sm90_seesaw_pair_bfirst", CONFIG)
