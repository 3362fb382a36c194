"""v58_cute: v57_cute's stale-max pair, with the exact redo inside the kernel instead of a second launch.

Run 23 measured v57_cute beside v35_cute on the H200 (harness, same call): spec 849.3 vs 870.9 us (-2.5%), decode
73.7 vs 73.3 us -- against run 22's probe of the same pair without any redo, 842.2 / 70.9 us.  The redo launch
that finds nothing to do costs ~7 us on spec (one wave of 132 216 KB CTAs behind a 1,024-tile grid) and ~3 us
on decode, most of what the stale max gained.

Here a one-split shape (spec) runs v46_cute's persistent loop (one CTA per SM, tiles i, i + 132, ...) with the
stale-max pair, and each CTA then loops again over the tiles of its own that the first loop flagged, with
v35_cute's exact pair, in the same kernel (``_cute_persistent.MlaSplitSm90SeesawPersistentStale``): the
producer warp and the consumers meet at one named barrier between the loops, the bulk O stores are waited for
before a tile can be stored again, and each flag is zeroed as its tile is redone.  With nothing flagged the
second loop is one flag load per warp.  Other shapes (decode's merged pairs, split partials) run v57_cute's
one-tile kernel and its guarded redo launch.

Prediction (before its first H200 run): correct on every test, including the max-rise tests that force the
redo; spec 838-846 us (the probe's 842.2 with v46_cute's loop, which measured within 0.5 us of v35_cute's grid
in run 21); decode as v57_cute (73-75 us).
Measured (run 23, harness, same call as v57_cute and v35_cute): spec 843.2 / 851.7 us in two calls, no better
than v57_cute (841.0 / 849.9): ncu gives one 852.9 us kernel against v57_cute's 841.9 + 4.0, so the stale pair
loses more in the persistent loop than the launch it saves.  Decode 74.6 / 75.1 us (as v57_cute).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v57_cute"
DESCRIPTION = "v57_cute with the one-split redo inside the kernel: a persistent stale-max loop, then an exact loop"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers", "persistent-tile-scheduler")
CONFIG = dict(SEESAW_CONFIG)

supports, prepare, run = version_functions("v58_cute", "sm90_seesaw_pair_stale_inline", CONFIG)
