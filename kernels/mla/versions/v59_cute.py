"""v59_cute: v57_cute's kernels where the stale max pays, v35_cute's where it does not.

Run 23 measured both stale-max versions beside v35_cute in one call (harness): spec v57_cute 841.0, v58_cute 843.2,
v35_cute 865.7 us; decode v57_cute 74.5, v58_cute 74.6, v35_cute 73.3 us.  On spec (1,024 one-split tiles) the
stale-max pair saves ~25 us and its redo launch (one wave of 132 CTAs reading flags) costs little; on decode (a
merged pair of splits per tile, 128 CTAs) the pair saves ~2.5 us (run 22's probe, with no redo) and the guarded
redo launch over 128 clustered 216 KB CTAs costs more than that.

So this version picks per shape (kind ``sm90_seesaw_pair_stale_onesplit``, resolved by
``_cute_kinds.shape_kind`` once the split plan is known): one-split shapes run v57_cute's stale-max kernel and its
persistent redo launch; every other shape (merged pairs, split partials) runs v35_cute's exact kernel, with no
redo launch.

Prediction (before its first H200 run): correct on every test; spec as v57_cute (within 0.5%), decode as v35_cute
(within 0.5%): the best of both in one version.
Measured (run 23 call 6, harness, beside v35_cute, v57_cute, v58_cute): decode 73.2 us (v35_cute 73.5), spec
846.4 us (v57_cute 849.9, v35_cute 871.0): the best row in both trials.  Call 9, beside v60_cute: 72.9 / 842.9 us.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v57_cute"
DESCRIPTION = "v57_cute's stale-max kernel and redo for one-split shapes (spec), v35_cute's kernel for the rest"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)

supports, prepare, run = version_functions("v59_cute", "sm90_seesaw_pair_stale_onesplit", CONFIG)
