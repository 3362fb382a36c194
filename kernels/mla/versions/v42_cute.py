"""v42_cute: v40_cute (m0 published before P_A) with WG0 issuing P_A V_AL before it stores P_A for WG1.

Run 15's timeline probe of v35_cute (spec, cycles from WG0's pair start, 6,069 per pair): S_B is done at
2,477, but P_A V_AL is issued only at 2,892 and P_A V_AR at 3,276, so the tensor pipe idles ~400 cycles while
WG0 stores P_A (2,409 -> 2,622), arrives on S0 and rescales O_L, and WG1 waits on S0 (2,771), adopts m0 and
rescales O_R. WG1's page-B softmax, which sets the pair, starts only after that. WG0's own P V takes P_A from
registers, so here it converts P_A, rescales O_L and issues P_A V_AL first, then stores P_A and arrives on S0;
with v40_cute's barrier M0, WG1 adopts m0 and rescales O_R meanwhile and issues P_A V_AR as soon as S0 arrives.
The SASS keeps v35_cute's six wgmma waits (no wait added before the P_A stores, which read registers an
in-flight wgmma also reads).

Prediction (before the H200 run): spec -2 to -5% (825-850 us): the tensor pipe's gap after S_B shrinks by
~200-300 cycles and WG1's chain to P_B starts ~300 cycles sooner, unless the P_A V_AR issue then waits behind
P_A V_AL in the pipe (run 15's v40_cute probe: an issue that lands behind the other warpgroup's wgmma took
~200 cycles); decode -0 to -1%.

Measured (run 15, devlog; call10-v42-v43/): self-check correct; spec 871.2 / 872.9 us vs v35_cute 863.1 / 863.6
(compare / harness, +0.9 / +1.1%), decode 72.7 / 73.0 vs 72.3 / 72.2. Prediction missed in sign. The probe: P_A
V_AL issued ~190 cycles sooner (2889 -> 2698), but WG0's P_A store, now beside that GEMM, ended at 2992 instead of
2620, S0 reached WG1 at 3305 instead of 2769, and the pair grew 6065 -> 6224 cycles. The handoff is on WG1's
critical chain. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v40_cute"
DESCRIPTION = "v40_cute with WG0's P_A V_AL issued before P_A is stored for WG1"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v42_cute", "sm90_seesaw_pair_c3m0pv", CONFIG)
