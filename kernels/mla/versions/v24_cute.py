"""v24_cute: v22_cute with the halves of O exchanged through global memory (L2) instead of DSMEM.

Same cluster pair and barriers as v22_cute, but each CTA stores the half of O the peer finishes
(64 KB fp32 + lse) into an L2-resident workspace (8.5 MB at decode) and, after the cluster
barrier (release / acquire at cluster scope), loads the peer's half from there.  An SM moves
~64 B per clock to and from L2, so 64 KB each way should take ~0.6 us per direction if the
DSMEM link (v22_cute) is the slower path.

Prediction (before the H200 run): decode 77.9 -> 75.5-77 us, spec unchanged.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v22_cute"
DESCRIPTION = "v22_cute with the halves of O exchanged through an L2-resident global workspace"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v24_cute", "sm90_seesaw_pair_l2", CONFIG)
