"""v65_cute: v64_cute's change again -- v59_cute with the split cap raised from 16 to 64, so a tiny batch fills the SMs.

v64_cute made this change and the loop discarded it before timing anything (orchestrator run
20261207-090520-mla-a1de): the trust layer failed its correctness tests on a line of the shared host code
(cute/host.py assigned into the plan module's state, a harness-side edit of that session, since reverted and now
caught on the CPU by tests/test_trust_static.py), not on anything of the version.  This version re-runs the same
change through the loop.

The change, and why it touches only tiny grids: v64_cute's docstring (the same CONFIG, ``max_splits = 64``, and
``choose_splits``' trim under a raised cap: serve_b1 runs 88 CTAs of 3 pages instead of 28 of 10).

Not applied from the task: cut-dram-rereads (spec's 6.4% DRAM bytes above the 293.9 MB minimum, ~19 MB, have no
isolated cause yet, and the task's estimate is 0.5%, inside spec's noise), fold-the-combine
(spec's second launch is the stale-max redo over the flagged tiles, 0.5% of the time; folding it in is v62_cute's
inline redo, measured 0.7% slower in run 30).

Prediction (before this loop's VERIFY): correct on every test; decode and spec unchanged (the same plan, the same
kernels: within the ~2% / 0.5% noise); serve_b1 about 26 us against v59_cute's ~30.5 us on an H100 (-14%). That is
what benchmarks.compare measured for v64_cute beside v59_cute, FlashInfer fa3 (30.0 us) and FlashMLA (35.1 us) on
the H100 of 2026-12-07 (outside the loop, the same code). v64_cute's first prediction, 20-25 us, missed: 26 us with
3 pages per CTA (~4.5 us of pages) implies ~21 us of fixed cost (two launches, Q's 72 KB, the ring's fill, the pair
merge and the combine of 22 partials), not the ~13 us read off v63_cute.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with the split cap raised to 64 (v64_cute again): a tiny batch (serve_b1) fills the SMs"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
# max_splits: the largest KV split count choose_splits may pick per (sequence, row block) (16 when unset)
CONFIG = dict(SEESAW_CONFIG, max_splits=64)

supports, prepare, run = version_functions("v65_cute", "sm90_seesaw_pair_stale_onesplit", CONFIG)
