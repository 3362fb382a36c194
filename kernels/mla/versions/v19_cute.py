"""v19_cute: v18_cute with the L2 evict-first hint on every KV block load.

FlashMLA loads K/V with ``EVICT_FIRST``.  On the staggered line the same hint measured -1.9% on
decode and no change on spec (v16_cute vs v15_cute, same call): decode reads each page from two
row-block CTAs at about the same time and never again, so its lines need not outlive that;
spec's 32 row blocks of a sequence run in one wave and hit L2 either way.

Prediction (before the H200 run): decode -1 to -2% vs v18_cute, spec unchanged.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v18_cute"
DESCRIPTION = "v18_cute with the L2 evict-first cache hint on the KV block loads"
FEATURES = EVICT_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v19_cute", "sm90_seesaw_ownp_evict", CONFIG)
