"""v55_cute: v54_cute whose tail pieces count in and merge with fewer round trips.

Run 20's probe (`tools/cute_tail_probe.py`, devlog) split v54_cute's tail: its 100 tail tiles whole, one CTA each,
take 126.8 us through the partial store and merge, 113.4 us through the direct grid's TMA-store epilogue, so
the merge path costs ~13 us a piece, and a bin holds two pieces. Here (``_cute_seesaw_tail``,
``MlaSplitSm90SeesawPairTailLean``) the merge keeps v10_cute's arithmetic but drops the per-thread GPU fences
around the count (the CTA barrier plus thread 0's acq_rel atomic publish and acquire, the usual semaphore
pattern) and loads each row's lse of every slot at once instead of in two dependent loops per row.
Prediction (before the H200 run): those are ~4-6 dependent round trips of ~0.5 us per piece, so the tail grid
alone ~129 -> ~124 us and spec ~-0.5% against v54_cute, still above v35_cute unless the probe's ablations show
the fences were the bulk of the 13 us. Decode is v35_cute's kernel (unchanged).
Measured (run 20, devlog): correct on every check. Spec 877.6 / 875.1 us against v35_cute's 870.1 / 869.6 in the same
call (compare / harness, +0.9% / +0.6%), decode 72.9 / 73.0 (v35_cute's kernel). Prediction missed: the tail
grid alone 127.6 us against v54_cute's 129.2, the 100 tail tiles whole 126.8 against 127.1 -- neither the fences nor
the lse round trips were where a merge's ~10.5 us go (run 20's noout probe: ~6 us of it is the bf16 O written from
registers, which v56_cute sends through a TMA store).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v54_cute"
DESCRIPTION = "v54_cute with the tail pieces' count-in and merge cut to fewer round trips (no fences, lse at once)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers",
                             "persistent-tile-scheduler")
CONFIG = {**SEESAW_CONFIG, "tail_edge_pages": 3.0}
supports, prepare, run = version_functions("v55_cute", "sm90_seesaw_pair_tail_lean", CONFIG)
