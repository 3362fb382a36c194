"""v37_cute: v35_cute with WG0 giving page A's last KV chunk back right after S_A, and every page loaded
(and read by S) last chunk first, so the chunk that comes free first is reloaded first.

A page is three 64 x 192 chunks (v33_cute). WG0 reads page A whole for S_A but only chunks 0-1 (dims
0-383, its O columns 0-255) for P_A V_AL, which takes P_A from registers; WG1 reads page A's chunks 1-2
for P_A V_AR, P_A included (P is stored in the page's last 64 dims, inside chunk 2). In v35_cute each
warpgroup releases a whole page after its last P V of it, so page A's chunk 2 waits for WG0's P_A V_AL
(~4620 cycles into the pair, run 13's probe) although WG1 is the last to read it (~4410). Here WG0
releases page A's chunk 2 right after S_A (the slot still refills only after WG1's release), and the
producer loads each page as chunks 2, 0, 1 (explicit pipeline states).

**Run 13's measured kernel also released page B's chunk 2 early** (after barrier S1, as "never read by
WG0"). That was a race found in review after the run: page B's chunk 2 holds P_B, which WG0's P_B V_BL
reads from shared memory, and the producer could reload it while that GEMM ran (the self-check passed
because the reload lands a few hundred cycles late). That release is removed; the kernel as it is now
ran on the GPU only in run 14 (below).

Prediction (before the H200 run, for the racy kernel): page A's chunk 2 reloads ~200 cycles and page B's
~500-900 cycles sooner; spec -1 to -3% (845-860 us), decode -0 to -2%, within the noise if the
release-to-landing latency (~2000 cycles) dominates.

Measured (run 13, devlog; the racy kernel): self-check correct; spec 870.5 / 868.7 us vs v35_cute 866.1 /
863.8 (compare / harness, +0.5%), decode 72.0 / 72.05 vs 72.7 / 72.8 (-1.0%). The probe: page B's first
load went out ~290 cycles sooner (its chunk 2 ~580), while page A was in flight, and page A landed ~375
cycles later. Not kept.

Measured again with the race removed (run 14, devlog): all-version suite correct (decode 72.6 / spec 881.7 us
vs v35_cute 72.4 / 876.5, 16 workers sharing the GPU); compare in one call 72.5 / 877.2 vs 72.1 / 875.8:
within the noise on both trials. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with WG0 releasing page A's last chunk right after S_A and each page loaded last chunk first"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v37_cute", "sm90_seesaw_pair_c3own", CONFIG)
