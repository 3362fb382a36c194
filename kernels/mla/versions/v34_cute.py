"""v34_cute: v28_cute with one barrier per KV page: one acquire and nine TMA issues back to back.

The other end of v33_cute's trade: the producer's per-page cost is one empty-barrier wait and
one expect_tx, but S of a page starts only once all 72 KB have landed (v8_cute's loading, which
v9_cute replaced by nine barriers when the schedule had no second page in flight).

Prediction (before the H200 run): between v33_cute and v28_cute; worse than v33_cute if S's
start on the first chunk matters more than the two saved acquires.

Measured (run 12, devlog): correct; 78.7 / 928.8 us vs v28_cute 75.6 / 918.2 (compare), harness 78.4 /
930.2 vs 75.7 / 918.7: slower than both.  Discarded.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v28_cute"
DESCRIPTION = "v28_cute with one barrier per KV page (one acquire, nine TMA boxes back to back)"
# one barrier per page: not per-block-tma-barriers any more
FEATURES = tuple(f for f in EVICT_FEATURES if f != "per-block-tma-barriers") + ("split-pair-dsmem-merge",
                                                                                "tma-store-epilogue")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v34_cute", "sm90_seesaw_pair_c1", CONFIG)
