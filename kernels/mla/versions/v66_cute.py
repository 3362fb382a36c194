"""v66_cute: v59_cute with the split cap raised from 16 to 64 (v64/v65_cute's change): a tiny batch fills the SMs.

The third loop attempt of one change.  v64_cute was discarded by the trust layer for a line of the shared host code
(orchestrator run 20261207-090520-mla-a1de; that line is gone).  v65_cute (run 20261207-092839-mla-3746) was
discarded as 3.9% slower on decode against a 3.0% bar, while serve_b1 was 13.7% faster: its decode runs
v59_cute's kernels (the same frozen digests) on v59_cute's plan (2 paired splits), and that session's decode row
carried ``sw_power_cap`` (its rounds drifted from 83 to 79 us); the public-call table of the next call on the same
H100 measured v65_cute's decode at 77.7 us against v59_cute's 78.6.  The loop now measures such a borderline
verdict again before it counts (``evaluate.borderline``), so this version re-runs the change.

The change, and why it touches only tiny grids: v64_cute's docstring (the same CONFIG, ``max_splits = 64``, and
``choose_splits``' trim under a raised cap: serve_b1 runs 88 CTAs of 3 pages instead of 28 of 10).

Not applied from the task (cut-dram-rereads, fold-the-combine): for v64_cute's reasons (its docstring).

Prediction (before this loop's VERIFY): correct on every test; decode and spec unchanged (the same plan and kernels:
within the ~2% / 0.5% noise); serve_b1 26-27 us against v59_cute's ~31 us on an H100 (-13 to -15%), as v64_cute
measured 26.1 against 30.5 us (benchmarks.compare) and v65_cute 27.1 against 31.4 us (the loop's VERIFY) on that
card. The cap's first prediction, 20-25 us (v64_cute), missed: 26 us with 3 pages per CTA (~4.5 us of pages) implies
~21 us of fixed cost (two launches, Q's 72 KB, the ring's fill, the pair merge and the combine of 22 partials), not
the ~13 us read off v63_cute.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v59_cute"
DESCRIPTION = "v59_cute with the split cap raised to 64 (v64/v65_cute's change): a tiny batch (serve_b1) fills the SMs"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
# max_splits: the largest KV split count choose_splits may pick per (sequence, row block) (16 when unset)
CONFIG = dict(SEESAW_CONFIG, max_splits=64)

supports, prepare, run = version_functions("v66_cute", "sm90_seesaw_pair_stale_onesplit", CONFIG)
