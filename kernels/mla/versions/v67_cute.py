"""v67_cute: v66_cute whose decode pairs also cluster the two row blocks, each KV chunk multicast to both.

Made through the loop (orchestrator run 20261207-232338-mla-aa10, handoff designer), for issue 35's decode target
(<= 62 us on the H200, where v59/v66_cute take ~73-75 us).

Why: decode's page loop is bound by the bytes that cross from L2 to the SMs, not by DRAM or the tensor pipe.
Each page is read by both row blocks of its (sequence, split), on two SMs: ~302 MB from L2 for 155.8 MB from DRAM
(run 25's H200 capture), DRAM 47% busy, the tensor pipe 63%.  The ring probe of run 11 (the same ring with no
math) takes 59.6 us on the H200: the loop cannot run faster than that ring however little math it does.

The change (``sm90_seesaw_pair_c3mcast``, ``_cute_seesaw_pair.MlaSplitSm90SeesawPairMulticast``): v35_cute's
paired kernel in a (2 row blocks) x (2 splits) cluster of 4 CTAs.  Each row block's CTA loads half of every KV chunk
and multicasts it to both row blocks of its split; a chunk's slot is refilled once both have freed it (the empty
barrier counts both CTAs' consumer warps, and a consumer frees only its own split's CTAs, mode n of the cluster
layout).  The pair merge is unchanged; its peer is this row block's CTA of the other split (rank row block + 2 *
split % 2).  So each page crosses L2 -> SM once per split: half the traffic.  Shapes with an odd row-block count
(h <= 64 at s = 1) keep the plain pair; one-split shapes (spec) keep v59_cute's stale-max kernel and its redo.

v21_cute multicast on v19_cute and lost (+3.6% decode): it had no pairs, so it paid a combine launch, and the
lockstep of the row blocks was blamed.  Here both row blocks do the same pages with the same row count, and the
cluster launch starts them together.

Not applied from the task: cut-dram-rereads and fold-the-combine (spec-only estimates of 0.7% and 0.5%, v65_cute's
reasons), the tensor-pipe entry (est. 0%).

Prediction (before this loop's VERIFY, H100): correct on every test.  Decode: the H100 timeline probe (run 34) puts
the page loop at 66.1 us, 2.07 us a page; if the L2 traffic bounds it, halving that traffic brings a page to the
math's pace, ~1.6-1.75 us, and decode from ~78.7 to 66-70 us (-11 to -16%).  Risks: the lockstep of the two row
blocks eats part of it (v21_cute); and 32 clusters of 4 CTAs of 216 KB must fit in one wave (a GPC with fewer than
16 SMs free holds fewer): a second wave would show as ~1.5-2x on decode.  Spec unchanged (the same kernels, within
0.5%).  serve_b1 (22 clusters of 4) within noise of v66_cute's ~26 us.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v66_cute"
DESCRIPTION = ("v66_cute with the decode pairs' two row blocks in one cluster too (2 x 2 CTAs): each KV chunk is "
               "multicast to both row blocks, so a page crosses L2 -> SM once per split")
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers", "tma-multicast-row-block-pair")
# max_splits: the largest KV split count choose_splits may pick per (sequence, row block) (16 when unset)
CONFIG = dict(SEESAW_CONFIG, max_splits=64)

supports, prepare, run = version_functions("v67_cute", "sm90_seesaw_pair_stale_onesplit_mcast", CONFIG)
