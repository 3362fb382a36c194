"""v36_cute: v35_cute with one CTA per SM looping over the tiles when the shape runs one split (spec).

Built in run 12, run in run 13.  See ``_cute_persistent`` for the loop and what it must keep right.
Shapes with several splits (decode: 2 splits merged in a cluster) run v35_cute's kernel unchanged.

Prediction (before the H200 run): the probe of v35_cute puts 4.06 us of each CTA's 114.2 us on spec
in the prologue and epilogue, which the producer running ahead into the next tile overlaps; the wave
tail (7.76 waves) stays.  Spec -2.5 to -3.5% (868 -> 838-846 us); decode unchanged.

Measured (run 13, devlog): correct.  As first built, spec 1260.6 us: ptxas had serialised every wgmma
(C7520) because of the one-warp O-store branch inside the loop; with the storing warp taken from
``make_warp_uniform`` (knowledge: wgmma-serialized-by-divergent-branch) 877.1 / 879.6 us vs v35_cute 868.7 /
869.7 (harness / compare, +1.0%), decode a tie.  Prediction missed: not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with a persistent grid (one CTA per SM walks the tiles) for one-split shapes"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers",
                             "persistent-tile-scheduler")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v36_cute", "sm90_seesaw_pair_persist", CONFIG)
