"""v52_cute: v51_cute with WG1's reload of page A issued beside its P_B V_BR instead of before it.

In v51_cute, WG1 reloads page A's blocks 4-8 right after its P_A V_AR wait: a warpgroup barrier and five elected
TMA issues (~150-250 cycles, estimated from the producer's ~100 cycles per slot) sit between that wait and O_R's
rescale and the issue of P_B V_BR, on WG1's chain. Here (``wg1_release_a_after_vbr``) WG1 rescales O_R and issues
P_B V_BR first, then reloads page A while P_B V_BR runs; a pair without page B reloads after the rescale. Page A's
V_R blocks go out ~150 cycles later than in v51_cute, still ~900 cycles before v35_cute's producer slots.
Compile check (CPU, `tools/cute_compilecheck.py sm90_seesaw_pair_rrlate:{16:128:direct,1:128:direct:paired,5:32:direct,
16:64:direct,1:16:direct,1:128}` and `_trace`): 168 registers, no spills, the trial kernels and the probe twin not
serialised (the partial-output kernel `1:128` is, as v51_cute's); WG1's pair loop is 1,302 SASS instructions
(v51_cute: 1,235; the third reload site is the pair without page B). The PTX of v35 and v51_cute's kinds is
unchanged by the flag.
Prediction (before any GPU run): if WG1's reload sits on the pair's chain in v51_cute, spec 0.5-2% below
v51_cute; if page A's V_R reload is what the pair waits for, up to ~1% above. Decode as v51_cute.
Measured (run 19, devlog): correct; spec 902.8 / 901.2 us against v51_cute's 900.8 / 904.2 (compare / harness, a
tie), decode 73.9 / 74.0. Prediction (0.5-2% below v51_cute) missed: the probe's pair grew to 6,604 cycles, S_A
waits longer (1,618 cycles into the pair), so WG1's reload was not what held page A.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v51_cute"
DESCRIPTION = "v51_cute with WG1's reload of page A issued beside its P_B V_BR, off WG1's chain"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v52_cute", "sm90_seesaw_pair_rrlate", CONFIG)
