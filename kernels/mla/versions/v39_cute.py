"""v39_cute: v35_cute with WG1 giving back page A's chunk 0 (dims 0-191) right after barrier S0.

A page is three 64 x 192 chunks (v33_cute). WG1 never reads page A's chunk 0: its P_A V_AR reads
chunks 1-2 (its O columns 256-511), and P_A sits in chunk 2 (the RoPE block). Yet in v35_cute chunk 0's
stage comes free only when WG1 releases page A whole after P_A V_AR (~4,600 cycles into the pair, run 12's
probe), though its other reader, WG0, is done with it after P_A V_AL (~3,400). Here WG1 arrives on chunk
0's empty barrier as soon as it passes S0 (which also tells it that WG0 released the previous pass), so
chunk 0 refills when WG0's P_A V_AL is done, while nothing else is loading, and the next S_A, which reads
chunk 0 first, can start on it sooner. (Suggested by a read of FlashMLA's sm90 kernel, which releases each
K tile at its last reader.)

Prediction (before the H200 run): spec -0.5 to -2% (851-864 us): the next pair's S_A starts ~100-300
cycles sooner of ~6,060 per pair, capped by chunks 1-2, which still wait for WG1's release; decode -0 to -1%
(its pairs are the ring's DRAM movement, which starts a third of page A sooner).

Measured (run 15, devlog; docs/kernels/runs/20261203-h200-handoff/call7-v39-v41/): self-check correct; spec
867.5 / 866.7 us vs v35_cute 865.7 / 868.1 (compare / harness), decode 72.6 / 72.8 vs 72.6 / 73.1: within the
noise. The probe: chunk 0 refilled as planned (producer's first slot of the next page A 4595 -> 3540 cycles into
the pair) but the pair stayed 6058 vs 6069 cycles: the next S_A is issue-bound behind the tensor pipe, not
waiting for page A. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with WG1 releasing page A's unread chunk 0 right after barrier S0"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v39_cute", "sm90_seesaw_pair_c3freea", CONFIG)
