"""v45_cute: v44_cute with WG1 giving back page A's chunk 0 (which it never reads) at barrier M0.

In v44_cute page A is freed last (WG1's P_A V_AR is its last GEMM of the pair), and the producer loads page
A's chunks before page B's, so both loads of the next pair could wait for P_A V_AR (a read-only review of
v44_cute pointed this out). Here chunk 0's last reader is WG0's P_A V_AL, so it refills while the B-side
GEMMs run. (v39_cute made the same release in v35_cute's schedule, where page A was not on the critical
path, and gained nothing.)

Prediction (before any GPU run; compile-checked only): spec 0 to -2% against v44_cute if v44_cute's probe
shows the next pair waiting for page A, else within the noise; decode within the noise.

Measured (run 16, devlog): correct; spec 904.1 / 903.6 us (compare / harness), -8% against v44_cute's 980.4 /
983.7 but +4% against v35_cute's 867.9 / 868.4 in the same call; decode 76.4 / 76.3 (v44_cute 79.8, v35_cute
72.5). The release did what the review expected (next pair's first A slot at 5,330 cycles vs v44_cute's
6,865; pair 6,215 vs 6,621) but v44_cute's chain (P_A published only after WG1's softmax B) stays. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v44_cute"
DESCRIPTION = "v44_cute with WG1 releasing page A's unread chunk 0 at barrier M0"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v45_cute", "sm90_seesaw_pair_bfirstfree", CONFIG)
