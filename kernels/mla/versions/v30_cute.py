"""v30_cute: v28_cute with page B's softmax run before page A's maximum is known.

The seesaw's second warpgroup turned S_B into P_B only after WG0 published m0 (page A's max),
so per pair the two softmaxes ran one after the other: run 10's timeline (v28_cute, spec) has
WG1 idle from S_B done (2473 cycles) to P_A (2921), its P_A V_AR issue blocked until 3485, and
page B's softmax ending at 4539 -- P_B V_BL / V_BR then finish at 6301, and page B's stage is
held from its landing (2255) to there, 4046 of the pair's 6446 cycles.

Here WG1 runs page B's softmax right after S_B against its *own* running max,
m' = max(m, rowmax S_B), while WG0 still runs page A's.  When m0 arrives, the true
m1 = max(m0, m') gives P_B = P' e(m' - m1) (a factor <= 1: 32 multiplies), the row sums and O_R's
rescale factor e(m0 - m1) exactly as before; WG1 issues P_A V_AR first, then publishes m1 and P_B.
The ring probe (_cute_ringprobe, this run) moved a pair's two pages in 3092 cycles with no math on
spec, so the stage hold, not the ring's rate, is what to cut.

Prediction (before the H200 run): P_B published ~3950 instead of 4539, P V GEMMs back to back,
page A given back ~4200 (was 4838) and page B ~5200 (was 6301); pair 6446 -> 5500-5900 cycles:
spec -8 to -15% (906 -> 780-840 us); decode -3 to -8% (its ring alone already needs ~5500 cycles
per pair at 1750 MHz: DRAM).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v28_cute"
DESCRIPTION = "v28_cute with WG1's page-B softmax against its own max before page A's max arrives"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "seesaw-provisional-max")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v30_cute", "sm90_seesaw_pair_prov", CONFIG)
