"""v14_cute: v13_cute with the combine launched as a programmatic dependent of the split kernel.

After v12_cute's warp-per-row combine (7.2 us), what is left between the two kernels of decode is
the second launch: the combine grid starts only once the split grid has drained.  With PDL the
split kernel lets its dependent launch as soon as all its CTAs are resident
(``griddepcontrol.launch_dependents`` -- the split grid fits on the GPU in one wave, so early
combine CTAs can never hold an SM a split CTA needs), and the combine's first instruction is
``griddepcontrol.wait``, which returns once the split grid has completed and its memory is
visible.  Spec (one split, direct epilogue, no combine) is unchanged.

Prediction (before the H200 run): decode -1 to -3 us against v13_cute; spec equal.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v13_cute"
DESCRIPTION = "v13_cute with the combine launched as a programmatic dependent of the split kernel (PDL)"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers", "warp-per-row-combine",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v14_cute", "sm90_seesaw_pf_pdl", CONFIG)
