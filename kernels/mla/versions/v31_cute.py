"""v31_cute: v30_cute with WG1 publishing P_B before it issues P_A V_AR.

v30_cute's timeline (devlog run 11, spec): WG1's softmax of page B ended at 3310 cycles (v28_cute:
4247), but P_B was published only at 4392 (v28_cute: 4539).  In between, WG1's P_A V_AR issue
returned 450 cycles after it was made (WG0's P_A V_AL held the tensor pipe: a wgmma issue does
not return while the other warpgroup's GEMM runs), and the last step -- P_B brought to m1,
converted, stored, fenced -- took another 500.  Here WG1 does that step first, then issues
P_A V_AR (its stall now overlaps nothing WG0 waits for).

Prediction (before the H200 run): P_B published ~3700 (was 4392), P_B V_BL issued right behind
P_A V_AR, page B given back ~5200 (was ~5630); pair 6283 -> 5600-5900 cycles in the probe, spec
-5 to -10% (904 -> 815-860 us), decode -2 to -6%.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v30_cute"
DESCRIPTION = "v30_cute with WG1 publishing P_B before it issues P_A V_AR"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "seesaw-provisional-max")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v31_cute", "sm90_seesaw_pair_provfirst", CONFIG)
