"""v43_cute: v35_cute with WG0 issuing P_A V_AL before it stores P_A for WG1 (v42_cute without barrier M0).

The control for v42_cute: whether moving WG0's P V ahead of its P store pays by itself. WG1 now gets S0
later (after WG0's rescale and issue, ~150-200 cycles), and adopts m0 and rescales O_R only then.

Prediction (before the H200 run): spec -0.5 to -2%: the tensor pipe starts P_A V_AL ~250 cycles sooner, but
WG1's chain to P_B starts ~150 cycles later; decode -0 to -1%.

Measured (run 15, devlog; call10-v42-v43/): self-check correct; spec 876.9 / 877.7 us vs v35_cute 863.1 / 863.6
(compare / harness, +1.6%), decode 73.1 / 72.8 vs 72.3 / 72.2. The probe: pair 6065 -> 6202 cycles, S0 at WG1
273 cycles later (3042 vs 2769). Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with WG0's P_A V_AL issued before P_A is stored for WG1"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v43_cute", "sm90_seesaw_pair_c3pv", CONFIG)
