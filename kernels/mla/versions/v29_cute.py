"""v29_cute: v28_cute with the page softmax as one straight-line block over both rows.

The 10-event probe (devlog run 10) split the softmax: the arithmetic takes 760-920 SM cycles per
64 x 64 page and the bf16 P store plus fence only ~200-240.  In the PTX each of a thread's two
rows runs its own chain -- a mask test in a branch, a 16-value max, two quad shuffles, 16 exp2,
a 16-add running sum -- and the branch keeps the second row from starting before the first has
finished: ~300 cycles of mostly latency per row, while the exp2 throughput floor of the whole
tile is ~256 (4096 exp2 at 16 per cycle per SM).  Here the (rare) mask runs for both rows in one
branch first; the maxima, the four shuffles, the 34 exp2 and pairwise (tree) row sums then
form one block the scheduler can interleave.  The softmax sits on the pair's critical chain
twice (WG0's page A before P_A is published, WG1's page B between P_A V_AR and P_B V).

Prediction (before the H200 run): softmax arithmetic 760-920 -> 400-550 cycles; pair period
-5 to -8%; spec 906 -> 840-870 us, decode 74.6 -> 70-72 us.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v28_cute"
DESCRIPTION = "v28_cute with the page softmax as one straight-line block over both rows (interleaved chains)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v29_cute", "sm90_seesaw_pair_ilp", CONFIG)
