"""v13_cute: v12_cute whose producer prefetches the KV pages into L2 ahead of their TMA loads.

v9_cute's decode profile: the split kernel takes 70-72 us for 32 pages per CTA, 2.2 us a page
against 1.9 us on spec (same kernel, pages shared by 32 row blocks and so mostly L2 hits), and
DRAM runs at only ~47% of peak (2.2 TB/s).  With two 72 KB stages a CTA has at most about one
page in flight, so decode waits on DRAM latency, not bandwidth.  Here the producer warp of row
block 0 issues ``cp.async.bulk.prefetch.tensor`` (TMA to L2, no shared memory) for the page three
ahead of the one it loads; row block 1 of the same (sequence, split) reads the same pages, so one
prefetch serves both.  Three pages = 216 KB per (sequence, split) in flight to L2, ~14 MB in all.

Prediction (before the H200 run): decode split kernel 72 -> 62-67 us (decode 82 -> 72-77 us);
spec unchanged within noise (its pages are already L2 hits).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v12_cute"
DESCRIPTION = "v12_cute with row block 0's producer prefetching KV pages into L2 three pages ahead of its TMA loads"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers", "warp-per-row-combine",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v13_cute", "sm90_seesaw_pf", CONFIG)
