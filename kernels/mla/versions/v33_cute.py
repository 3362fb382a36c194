"""v33_cute: v28_cute with each KV page loaded as three 64 x 192 TMA chunks (three barriers) instead of nine.

Run 11/12's timelines: WG0 waits ~1480 cycles at every pair start for page A's blocks. Page A's
stage comes free at ~4830 (P_A V_AL done); the producer then takes ~940 cycles to acquire nine
slots and issue nine boxes (wait on the empty barrier, arrive.expect_tx, index arithmetic, the
TMA: ~105 cycles each), and the last block lands ~2000 cycles later. The ring alone (probe
``stream``) moves 18 boxes per pair in 3092 cycles, ~172 cycles per box, close to that issue
cost. Here a page is three barriers (CuTe still issues a 64-dim box per TMA instruction, so nine
TMAs, but three acquires and three expect_tx); S of a page follows the chunks as they land.

Prediction (before the H200 run): if the producer's per-slot cost sits on the page's
release-to-landing path, that path loses ~400-600 cycles and the pair -4 to -7% (spec 905 ->
845-870 us, decode 74.5 -> 70-72 us); if the TMA engine's per-box rate or L2 sets it, within the
noise (S then waits for 24 KB instead of 8 KB before its first k-step: a small loss).

Measured (run 12, devlog): correct; spec 877.4-882.1 us vs v28_cute 910.1-918.7 in three calls (-3.6 to
-4.1%), decode 73.9-75.6 vs 75.1-75.6 (within the noise; its pages come from DRAM, where the slot
handshake is a small part of a page's latency -- not measured apart); probe pair 6079 vs 6445
cycles, page A reissued in 421 cycles instead of 943.  The best until v35_cute.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v28_cute"
DESCRIPTION = "v28_cute with three 64 x 192 TMA chunks (three barriers) per KV page instead of nine 64 x 64"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v33_cute", "sm90_seesaw_pair_c3", CONFIG)
