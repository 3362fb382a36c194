"""v64_cute: v59_cute with the split cap raised from 16 to 64, so a tiny batch fills the SMs.

``choose_splits`` takes the fewest splits per (sequence, row block) within 5% of the best wave efficiency, over
1..16 splits. The cap binds only on tiny grids: ``serve_b1`` (b1, t8191, h128: two 64-row blocks, 128 pages) gets 14
splits, 28 CTAs of 10 pages each, and 104 of the 132 SMs stay idle (run 31: 30.4 us against a 2.9 us floor,
FlashInfer 8.4% ahead). With CONFIG ``max_splits = 64`` the same rule picks 61 splits of 3 pages; ``choose_splits``
now trims that to the fewest splits with the same pages per CTA (43, rounded to 44 by the pairing: 22 merged pairs
per row block), so 88 CTAs walk 3 pages each and the combine reads 22 partials. Every shape whose grid already fills
the SMs at <= 16 splits picks what it picked before (decode 2 splits, spec 1, every other serving shape of the
spec): only b * row blocks <= 7 changes.

Not applied from the task: cut-dram-rereads (spec's 6.4% DRAM bytes above the 293.9 MB minimum, ~19 MB, have no
isolated cause yet, and the task's estimate is 0.5%, inside spec's noise), fold-the-combine
(spec's second launch is the stale-max redo over the flagged tiles, 0.5% of the time; folding it in is v62_cute's
inline redo, measured 0.7% slower in run 30).

Prediction (before its first GPU run): correct on every test; decode and spec unchanged (the same plan, the same
kernels: within the ~2% / 0.5% noise); ``serve_b1`` 20-25 us against v59_cute's ~30 us (-20 to -33%): each CTA's
fixed cost (Q's 72 KB, the ring's fill, the merge and partial store, ~13 us by run 30's v63_cute split) stays, its
10 pages (~15 us at ~1.5 us a page on an unloaded GPU) become 3 (~4.5 us), and the combine reads 22 partials
instead of 7 (+~2 us).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with the split cap raised to 64: a tiny batch (serve_b1) fills the SMs"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
# max_splits: the largest KV split count choose_splits may pick per (sequence, row block) (16 when unset)
CONFIG = dict(SEESAW_CONFIG, max_splits=64)

supports, prepare, run = version_functions("v64_cute", "sm90_seesaw_pair_stale_onesplit", CONFIG)
