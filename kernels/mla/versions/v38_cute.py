"""v38_cute: v37_cute's chunk order and early release in the decode (paired-split) kernels only, v35_cute's
kernel for spec.

Run 13 measured v37_cute against v35_cute in one call: decode 72.0 / 72.05 vs 72.7 / 72.8 us (compare /
harness, -1.0%), spec 870.5 / 868.7 vs 866.1 / 863.8 (+0.5%). Its spec probe: page B's first load went
out ~290 cycles sooner while page A -- the page the pair waits for -- was still in flight, and page A
landed ~375 cycles later (S_A issued at 1454 vs 1079 cycles into the pair). Spec's pages are L2 hits and
the ring's per-SM transfer is shared; decode's come from DRAM. So the order and the release apply only to
the paired-split kernels (``pair``); the one-split kernel (spec) compiles to v35_cute's PTX.

Prediction (before the H200 run): decode as v37_cute (~72.0 us, -1% vs v35_cute), spec as v35_cute.

Measured (run 13, devlog): self-check correct; decode 72.9 / 73.50 us vs v35_cute 73.5 / 73.17 (compare /
harness: -0.8% and +0.5%), spec 865.3 / 865.1 vs 866.0 / 863.8. v37_cute's decode gain did not repeat:
within the noise. Not kept. **That decode kernel had v37_cute's race** (page B's chunk 2, which holds P_B,
released before WG0's P_B V_BL read it; found in review after the run, removed since; see v37_cute).

Measured again with the race removed (run 14, devlog): all-version suite correct (decode 73.7 vs v35_cute
72.4 us, 16 workers sharing the GPU); compare in one call 72.5 vs 72.1 (+0.6%). Its spec kernel (v35_cute's
PTX) read 873.9 vs 876.5 / 873.9 vs 875.8: the run's noise between identical kernels. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v37_cute"
DESCRIPTION = "v37_cute's chunk order and early chunk releases in the decode (paired-split) kernels only"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v38_cute", "sm90_seesaw_pair_c3split", CONFIG)
