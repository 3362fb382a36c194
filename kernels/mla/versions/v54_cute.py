"""v54_cute: v35_cute with the last wave of the one-split (spec) grid cut into balanced pieces, one bin per SM.

v35_cute's spec grid is 1,024 (row block, sequence) tiles of 64 pages on 132 SMs: 7.76 waves, run as 8. Run 17's
scaling fit puts a tile at ~1.59 us per page plus ~4 us of prologue and epilogue (~106 us), so for the whole last
wave 32 SMs idle (the probe's CTA takes 114 us of the 932 us trace run, 8.2 tiles per SM in series). FlashMLA's
128-CTA grid leaves 4 SMs idle the whole run, the same 3%. Here (``_cute_seesaw_tail``, ``_cute_tail_plan``):
- the first 924 tiles (seven full waves) run whole, one CTA each, in a direct grid (v35_cute's kernel, CTA x on
  tile x);
- the last 100 tiles' 6,400 pages are cut into 132 contiguous bins of equal cost (pages + 3 pages' worth per piece
  for its Q load and epilogue): 225 pieces, at most 3 per tile. A second grid, launched as a programmatic dependent
  of the first, runs one piece per CTA: every bin's first piece, then the second pieces longest first, so the SM
  that frees first takes the longest. Each piece stores an fp32 partial; the last piece of a tile to finish merges
  them (v10_cute's fused merge) and resets the tile's counter;
- decode (paired splits) is v35_cute's kernel unchanged.
Prediction (before the H200 run): the last wave's ~106 us becomes ~48.5 pages x 1.59 us + two edges + the merge,
~87-92 us, so spec -1.5 to -2% (850-856 us); decode unchanged (+-2%). A miss would come from the pieces' edges (fp32
partials, 1-4 page pieces), from the dispatch order not holding, or from the tail grid not starting before the
direct grid ends.
Measured (run 19, devlog): correct on every check, including a ragged 9-sequence shape that runs 132 tiles whole
and 156 in pieces (some empty). Spec 889.5 / 891.0 us against v35_cute's 878.9 / 880.1 in the same call (compare /
harness, +1.2%), decode 72.9 / 74.4 (v35_cute's kernel). Prediction missed. `tools/cute_tail_probe.py` in that call:
all tiles direct 876.2 us, the 7 full waves alone 775.1, the tail grid alone 129.3 (ncu: 755.0 + 116.8 us, the
tail at 59% tensor pipe). The plain grid's last 100-CTA wave costs only 101 us (a full wave 110.7), so a perfect
balance could save ~1.5-2%; the tail grid spends ~129 us on ~82 us of work (piece edges, merges and dispatch
order not yet separated). The first build also ran decode's paired shape through the tail path (116 us); fixed
before the measured call.
Run 20 (devlog) split the tail's ~129 us with `tools/cute_tail_probe.py`: the 100 tail tiles whole take 113.8 us through
the direct grid, 112.8 / 116.6 / 127.1 us through the tail grid with no partial O store and no merge / the fp32
partial store / both (one piece per tile); balanced, 107.2 / 114.0 / 129.2 us. The balancing holds, and with a free
partial store and merge the tail (which counts ~12-15 us less inside the two grids than alone) would save ~1-1.5% of
spec, short of the target's 2-3%; each piece's partial and merge (~10-14 us) eat it. v55/v56_cute's cheaper merges
did not change that: the line is stopped.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with the spec grid's last wave cut into one balanced bin of pages per SM (two grids, PDL)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers",
                             "persistent-tile-scheduler")
# the tail plan's cost of a piece beyond its pages, in pages (Q load, partial store, merge); run 19 measured 3
CONFIG = {**SEESAW_CONFIG, "tail_edge_pages": 3.0}
supports, prepare, run = version_functions("v54_cute", "sm90_seesaw_pair_tail", CONFIG)
