"""v40_cute: v35_cute with WG0 publishing m0 (new barrier M0) before it converts and stores P_A (barrier S0).

In v35_cute WG1 waits on S0 for m0 and P_A together, then adopts m0 (one exp2 per row), rescales O_R
(128 FMUL per thread) and only then issues P_A V_AR; its page-B softmax waits behind all of that. WG0's
bf16 conversion, P store and proxy fence (~230 cycles in run 12's probe) sit between m0 being known and S0.
Here WG0 arrives on M0 right after writing m0, so WG1's adoption and rescale run beside WG0's P store and
P_A V_AR issues as soon as S0 arrives. (From a read of FlashMLA's sm90 kernel, which publishes the max
before P.)

Prediction (before the H200 run): spec -1 to -3% (842-860 us): P_A V_AR and page B's softmax start
~150-300 cycles sooner of ~6,060 per pair, if WG1's chain sets the pair (run 13's 2 x 2 put the remaining gap
on the softmax); decode -0 to -1%.

Measured (run 15, devlog; call7-v39-v41/): self-check correct; spec 867.2 / 866.4 us vs v35_cute 865.7 / 868.1
(compare / harness), decode 73.0 / 72.9 vs 72.6 / 73.1: within the noise. The probe's pair went 6069 -> 6001
cycles (traced kernel 933 -> 924 us), but WG1's P_A V_AR issue moved only 64 cycles: its issue waits ~200 cycles
behind WG0's P_A V_AL in the pipe. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with m0 published (barrier M0) before P_A is converted and stored (barrier S0)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v40_cute", "sm90_seesaw_pair_c3m0", CONFIG)
