"""v56_cute: v55_cute whose tail pieces write the merged O through shared memory and one TMA store.

Run 20's probe ablations (devlog) put a balanced bin's cost beyond its pages in the fused merge (~15 us a bin) and
the fp32 partial store (~7 us a bin), and the bf16 O a merging piece writes from registers (4-byte stores, a quad
of threads covering 16 B of a row) was the likeliest part of the merge. Here (``_cute_seesaw_tail``,
``MlaSplitSm90SeesawPairTailTmaOut``) the last piece of a tile stages its merged bf16 O in Q's buffer (no GEMM
reads it after the loop) and each warpgroup writes its half with one TMA store, as v28_cute's direct epilogue
does; the lse and the rest of v55_cute's merge are unchanged. Decode is v35_cute's kernel (unchanged).
Prediction (before the H200 run, made with the noout probe still unmeasured): if the O stores are most of the
~10.5 us merge, the tail grid alone ~129 -> ~115 us (the nomerge probe's 114) and spec ~-1.5% against
v54/v55_cute (877 -> ~864 us in loan 3's terms), 0.5-1% below v35_cute; if they are not, no change.
Measured (run 20, devlog): correct on every check; its tail kernel spills 16 bytes per thread outside the page loop.
Spec 877.3 / 875.3 us against v35_cute's 873.0 / 870.7 in the same call (compare / harness, +0.5%), decode 72.3 /
72.5 (v35_cute's kernel). Prediction missed: the probe in the same loan timed v55_cute's merge without any O stores
(noout) at 120.5 us for the 100 tail tiles whole against 126.5 with them, so the O stores are ~6 us of the ~10 us
merge; the TMA store gives back 3.7 us of those whole (122.8) and 2 us balanced (tail grid 125.5 vs 127.5).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v55_cute"
DESCRIPTION = "v55_cute with the tail's merged O staged in shared memory and written by one TMA store per warpgroup"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers",
                             "persistent-tile-scheduler")
CONFIG = {**SEESAW_CONFIG, "tail_edge_pages": 3.0}
supports, prepare, run = version_functions("v56_cute", "sm90_seesaw_pair_tail_tmaout", CONFIG)
