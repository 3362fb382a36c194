"""v61_cute: v59_cute with v41_cute's kernel on the shapes that do not run the stale max (decode).

Made by the orchestrator's handoff loop (run 20261206-115434-mla-165a, iteration 1).  The task: decode is
compute-bound with the tensor pipe 63% busy (37% idle) and one 216 KB CTA per SM; apply raise-tensor-pipe-busy,
relax-occupancy-limit and fill-the-last-wave.

Applied: raise-tensor-pipe-busy only.  On decode (merged split pairs, no stale max) v59_cute runs v35_cute's
kernel; v41_cute's kernel (``sm90_seesaw_pair_c3freem0``: page A's chunk 0 freed at S0 and m0 published before
P_A, so WG1's chain and the next page's TMA start earlier) is the same CTA with fewer tensor-pipe gaps per page.
Kind ``sm90_seesaw_pair_stale_onesplit_c3freem0``: one-split shapes (spec) keep v59_cute's stale-max kernel and
redo launch, every other shape runs v41_cute's kernel.  Not applied: relax-occupancy-limit (one CTA per SM is
the 216 KB ring of Q + two pages; a smaller ring is the 1-stage design run 11 measured slower) and
fill-the-last-wave (decode's 128 tiles are 0.97 of a wave of 132 SMs; a finer split makes 2 waves).

Prediction (before its first run): correct on every test; decode -0.5% against v59_cute (v41_cute read 73.2
against v35_cute's 74.0 us in run 27, but 73.3 against 73.1 in run 15: the gain is inside the ~2% noise), spec
unchanged (the same kernel, within 0.5%).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with v41_cute's kernel (chunk 0 freed at S0, m0 before P_A) on decode's merged pairs"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)

supports, prepare, run = version_functions("v61_cute", "sm90_seesaw_pair_stale_onesplit_c3freem0", CONFIG)
