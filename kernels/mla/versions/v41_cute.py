"""v41_cute: v39_cute and v40_cute together (page A's chunk 0 freed at S0, m0 published before P_A).

Prediction (before the H200 run): spec -1.5 to -4% (833-855 us), about the sum of the two if page A's
reload and WG1's chain are separate limits, less if one hides the other; decode -0 to -1%.

Measured (run 15, devlog; call7-v39-v41/): self-check correct; spec 867.9 / 873.4 us vs v35_cute 865.7 / 868.1
(compare / harness), decode 72.6 / 73.3 vs 72.6 / 73.1: no gain (the harness's +0.6% is at the edge of its noise
with 4 workers sharing the GPU). Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v39_cute"
DESCRIPTION = "v39_cute with m0 published before P_A (v40_cute's barrier M0)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v41_cute", "sm90_seesaw_pair_c3freem0", CONFIG)
