"""v16_cute: v15_cute with the L2 evict-first hint on every KV block load.

FlashMLA loads K/V with ``EVICT_FIRST`` and reports better L2 hit rates.  Our decode trial reads
each page from two CTAs (row blocks 0 and 1 of a sequence and split) at about the same time and
never again; marking the lines evict-first should keep Q, the block table and the other row
block's pending lines resident.  Prediction (before the H200 run): decode -0 to -3% vs v15_cute,
spec unchanged (its 32 row blocks of a sequence run in the same wave and hit L2 either way).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v15_cute"
DESCRIPTION = "v15_cute with the L2 evict-first cache hint on the KV block loads"
FEATURES = EVICT_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v16_cute", "sm90_stagger_evict", CONFIG)
