"""v46_cute: v36_cute's persistent loop with Q's buffer after the KV ring in shared memory (``q_after_kv``).

v36_cute (one CTA per SM walking the tiles, run 13) was 1.0% slower than v35_cute on spec although it
overlaps each tile's first pages with the previous epilogue. Its SASS (compiled here, nvdisasm) shows why it
might be: ptxas holds the shared-memory base in a vector register for the whole kernel and moves it to a
uniform register (R2UR) before the consumers' barrier waits and wgmma descriptors -- 10 R2UR per pair in
WG0's pair loop and 16 in WG1's, against none in v35_cute's (94 in the kernel against 2). Compiling
variants (seconds each, no GPU) isolated the trigger: Q's TMA load inside a loop of the producer while Q's
buffer sits at offset 0 of the dynamic allocation (a one-tile producer: 2 R2UR; the same loop with Q placed
after the ring: none in the pair loops). Here Q's buffer follows the ring; nothing else changes. Decode
(two splits merged in a cluster: no loop) runs v35_cute's kernel, byte-identical PTX.

Prediction (before any GPU run; compile check: 168 registers, no spills, no serialised wgmma, the pair
loops 997 / 1,101 SASS instructions with no R2UR against v35_cute's 1,001 / 1,092): if the R2UR were what
cost v36_cute its gain, spec lands 0.5-1.5% below v35_cute (855-864 us against ~868); if they cost little,
it lands on v36_cute (~877 us) and the loop's loss is elsewhere (the scaling run, ``benchmarks.scaling``,
then says whether it is in the pairs or the tile edges). Decode unchanged.

Measured (run 17, devlog): correct; spec 871.2 / 870.9 us (compare / harness) against v36_cute's 877.9 /
878.4 and v35_cute's 870.7 / 866.3 in the same call; decode 73.5 / 73.2 (v35_cute 73.4 / 73.5). So the R2UR
were v36_cute's loss (-0.8 / -0.9%), but the loop itself buys nothing: a tie with v35_cute, not the predicted
855-864. The probe: the loop hides ~800 cycles of Q latency per tile (0.4%); the scaling run: fixed cost 4.3 us
below v35_cute's, cost per page 0.9% above. Not kept as the best.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v36_cute"
DESCRIPTION = "v36_cute's persistent loop with Q's shared-memory buffer after the KV ring (no R2UR in the pair loops)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers",
                             "persistent-tile-scheduler")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v46_cute", "sm90_seesaw_pair_persistql", CONFIG)
