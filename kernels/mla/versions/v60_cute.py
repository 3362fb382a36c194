"""v60_cute: v59_cute with spec's redo inside the kernel and no tile loop: each CTA redoes its own tile.

Run 23's ncu: v59_cute's spec is a 842.1 us stale-max kernel plus a 4.1 us redo launch that finds nothing;
v58_cute moved the redo into the kernel but also moved the stale pair into a 132-CTA tile loop, which cost it
~11 us (852.9 us, one kernel).  Here the grid is every tile, as in v57_cute (``max_ctas`` unbounded in
v58_cute's kernel, ``_cute_persistent.MlaSplitSm90SeesawOneTileStale``): a CTA runs its one tile with the stale
max, then -- only if that tile flagged a row -- runs it again with v35_cute's exact pair, behind the same named
barrier and bulk-store wait as v58_cute.  Decode shapes run v35_cute's exact kernel, as in v59_cute (per-shape
kind ``sm90_seesaw_pair_stale_tileredo_onesplit``).

Prediction (before its first H200 run): correct on every test; spec ~4 us below v59_cute under ncu (842 vs 846 us:
the redo launch gone, the one-tile CTA as v57_cute's), within the harness's noise of it (-0.5%); decode as
v59_cute.  If the one-tile loop is as slow as v58_cute's (~853 us), the cost is in the loop's code path (O zeroed
per tile, the stand-in page check, Q's buffer after the ring), not in the tile loop itself.
Measured (run 23 call 9, harness beside v59_cute): decode 73.5 vs 72.9 us, spec 848.4 vs 842.9 us (+0.7%): the
second branch -- the stale pair is slower through the looping code path even with one tile per CTA.  No ncu
report yet (the session's device budget ran out before the capture).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with each spec CTA redoing its own flagged tile in the kernel (no redo launch, no tile loop)"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)

supports, prepare, run = version_functions("v60_cute", "sm90_seesaw_pair_stale_tileredo_onesplit", CONFIG)
