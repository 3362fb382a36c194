"""v47_cute: v46_cute with the next tile's Q loaded while this tile's last pair and epilogue run (``loop_q_early``).

In v36_cute/v46_cute O is staged in Q's buffer for its TMA store, so the next tile's Q can load only after the
epilogue's store has read that buffer: the next tile's first pages are prefetched, its Q is not (run 12's probe:
1.86 us of prologue and 2.20 us of epilogue per 114 us tile on spec, one tile per CTA). Here each warpgroup gives
Q's buffer back as soon as its last S GEMM of the tile is done (WG0 after S_A, WG1 after S_B of the last pair),
the producer then loads the next tile's Q before its pages, and the persistent kernel stores O from registers
(no staging; the one-tile kernels of the same kind, decode's, keep the TMA-store epilogue: decode's PTX is
v35_cute's byte for byte; that kernel is why FEATURES still names tma-store-epilogue).

Prediction (before any GPU run; compile check of spec, decode and five fuzz shapes: 168 registers, no spills,
no serialised wgmma, no R2UR in the pair loops, 1,000 / 1,103 instructions): the next tile starts as soon as
the epilogue ends, with Q and its first pages in place. If Q's ~1 us landing was on v46_cute's path and the
register-store epilogue is no slower than the TMA one, spec -0.5 to -1.5% against v46_cute (with v46_cute's own
prediction: 845-860 us); if the register stores are slower (run 10 measured v23_cute's register-store epilogue at
~8,100 cycles against v28_cute's TMA store at ~3,900, but v23_cute's wgmma were serialised), it can land above
v46_cute, and the two together say which. Decode unchanged.

Measured (run 17, devlog): correct; spec 897.4 / 897.0 us (compare / harness), +3.0% against v46_cute's
871.2 / 870.9 in the same call; decode 73.5 / 76.4. The prediction's second branch: the probe has the exposed Q
latency down from 1,678 to 93 cycles, and the register-store epilogue up from 3,849 to 7,936 cycles per tile
(~2.3 us, ~18 us over a CTA's tiles). Discarded.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v46_cute"
DESCRIPTION = "v46_cute with Q's buffer given back after the last S GEMMs and the next Q loaded under the epilogue"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers",
                             "persistent-tile-scheduler")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v47_cute", "sm90_seesaw_pair_persistqe", CONFIG)
