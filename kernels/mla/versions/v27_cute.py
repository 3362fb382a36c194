"""v27_cute: v26_cute with WG1's P_A V_AR queued before WG0's P_A V_AL.

The timeline probe (``_cute_trace``, devlog run 9) shows that a warpgroup's wgmma *issue* waits
while the other warpgroup's wgmmas run: in v19_cute..v26_cute WG1 gets P_A, rescales O_R and
issues P_A V_AR ~500-700 cycles after WG0 issued P_A V_AL, and only then starts page B's
softmax (~1,000 cycles), which both P_B V GEMMs wait for -- the tensor pipe idles ~600 cycles
per pair before them.  Here WG0, once P_A is published and O_L rescaled, waits on a named
barrier until WG1 has queued P_A V_AR; WG1's issue meets an idle pipe and its softmax starts
at once, while WG0's P_A V_AL queues behind (WG0 has nothing to do until P_B arrives anyway).

Prediction (before the H200 run): the pair period -8 to -14% (the probe's ~6,500 cycles to
~5,500-6,000): spec 937 -> 840-880 us, decode 76 -> 68-72 us.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v26_cute"
DESCRIPTION = "v26_cute with WG1's P_A V_AR issued before WG0's P_A V_AL (named barrier)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v27_cute", "sm90_seesaw_pair_vrfirst", CONFIG)
