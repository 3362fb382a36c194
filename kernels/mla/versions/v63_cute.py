"""v63_cute: v59_cute with four KV splits per row block on every shape (a finer grid for the last wave).

Made by the orchestrator's handoff loop (run 20261206-115434-mla-165a, iteration 3).  The task: decode is
compute-bound, tensor pipe 63% busy, one CTA per SM, grid 128 CTAs = 0.97 waves of 132 SMs (3% tail idle); apply
relax-occupancy-limit, fill-the-last-wave and "Keep the tensor pipe busy between wgmma groups".

Applied: fill-the-last-wave, the way the knob allows: ``num_splits = 4`` (v59_cute picks 2 on decode, 1 on spec).
Decode becomes 256 CTAs (1.94 waves, the same 97% wave efficiency) in pairs that leave two partials per row block
for the combine; spec becomes 4,096 CTAs of 16 pages each, paired, so it leaves the stale-max one-split kernel for
v35_cute's.  Not applied: relax-occupancy-limit (impossible: the 216 KB ring of Q and two pages per CTA) and
"Keep the tensor pipe busy" (tested by v61_cute, no gain beyond noise).

Prediction (before its first run): correct on every test, and slower on both trials, discarded: decode +4% (each
CTA's fixed cost -- Q's 72 KB load, the ring's fill, the merge -- paid twice as often, plus a combine launch; the
wave efficiency stays 97%), spec +4% (v35_cute's kernel, 871 against 847 us in run 27, plus the combine over
two partials).  The point: the profiler's 3% fill-the-last-wave estimate assumes the tail can be filled; a finer
split cannot fill 4 idle SMs of 132 without doubling per-tile costs.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with num_splits = 4 on every shape (256 decode CTAs, 4,096 spec CTAs)"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG, num_splits=4)

supports, prepare, run = version_functions("v63_cute", "sm90_seesaw_pair_stale_onesplit", CONFIG)
