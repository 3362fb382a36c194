"""v62_cute: v59_cute with the spec trial's redo done inside the persistent CTAs (no second launch).

Made by the orchestrator's handoff loop (run 20261206-115434-mla-165a, iteration 2).  The task: decode is
compute-bound, tensor pipe 63% busy, one CTA per SM, a 3% tail on decode's 0.97-wave grid; apply "Balance the last
wave of CTAs over the SMs", "Keep the tensor pipe busy between wgmma groups" and "Fit a second CTA per SM".

Applied: Balance the last wave of CTAs over the SMs, on spec.  v59_cute's spec runs v57_cute's stale-max grid (1,024
tiles, 7.76 waves of 132 SMs) and then a redo launch: one more wave of 132 CTAs that reads every tile's flag and
redoes the flagged ones.  Here the one-split shapes run v58_cute's kernel (``sm90_seesaw_pair_stale_inline``): each
persistent CTA redoes the flagged tiles it ran in a second loop, so the redo's wave rides in the main grid's last
partial wave.  Kind ``sm90_seesaw_pair_stale_inline_onesplit``; every other shape (decode) runs v35_cute's kernel
as in v59_cute.  Keep the tensor pipe busy was tested by v61_cute (no gain beyond noise); Fit a second CTA per SM
is impossible within the constraints (Q 72 KB + two 72 KB pages = 216 KB of the 227 KB a CTA may use).

Prediction (before its first run): correct on every test; spec +0.3% against v59_cute, no gain: run 23 measured
v58_cute's kernel at 843.2 against v57_cute's 841.0 us, run 27 848.8 against v59_cute's 846.6 (the loop in the
persistent CTA costs what the redo launch saved); decode unchanged (the same kernel) within its ~2% noise.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with v58_cute's inline redo (no redo launch) on one-split shapes (spec)"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)

supports, prepare, run = version_functions("v62_cute", "sm90_seesaw_pair_stale_inline_onesplit", CONFIG)
