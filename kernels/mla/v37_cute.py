"""v37_cute: v35_cute with WG0 giving back at once the KV chunks it will not read again, and every page
loaded (and read by S) last chunk first, so the chunk that comes free first is reloaded first.

A page is three 64 x 192 chunks (v33_cute). WG0 reads page A whole for S_A but only chunks 0-1 (dims
0-383, its O columns 0-255) for P_A V_AL, and of page B only chunks 0-1 (P_B V_BL); WG1 reads page A's
chunks 1-2 (P_A V_AR) and page B whole. In v35_cute each warpgroup releases a whole page after its
last P V of it, so page A's chunk 2 waits for WG0's P_A V_AL (~4620 cycles into the pair, run 13's
probe) although WG1 is the last to read it (~4410), and page B's chunk 2 waits for WG0's P_B V_BL
(~5900) although WG0 never reads it and WG1 is done at ~5390. Here WG0 releases page A's chunk 2 right
after S_A and page B's once P_B arrived (after barrier S1: WG1 has released the previous pass of those
slots by then), and the producer loads each page as chunks 2, 0, 1 (explicit pipeline states).

Prediction (before the H200 run): page A's chunk 2 reloads ~200 cycles and page B's ~500-900 cycles
sooner; if the ring's transfer (~82 B/cycle per SM, run 12) rather than its latency sets when page A has
landed, page A lands ~100-250 cycles sooner: spec -1 to -3% (845-860 us), decode -0 to -2%. Within the
noise if the release-to-landing latency (~2000 cycles) dominates.

Measured (run 13, devlog): correct; spec 870.5 / 868.7 us vs v35_cute 866.1 / 863.8 (compare / harness,
+0.5%), decode 72.0 / 72.05 vs 72.7 / 72.8 (-1.0%).  The probe: page B's chunk 2 now loads while page A is in
flight and page A lands ~375 cycles later.  Not kept; v38_cute keeps it for decode only.
"""

from __future__ import annotations

from kforge_kernels.mla._cute_host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with WG0 releasing the KV chunks it does not read at once and each page loaded last chunk first"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v37_cute", "sm90_seesaw_pair_c3own", CONFIG)
