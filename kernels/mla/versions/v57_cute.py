"""v57_cute: v35_cute's pair with the stale max (``_cute_seesaw_stale``), and an exact redo of any tile it may miss.

Both warpgroups take pair k's P against m_k, the max of the pages before the pair, so O is rescaled once per
pair (beside the next S) and WG1 issues P_A V_AR the moment P_A arrives -- v35_cute adopts page A's max and
rescales O_R there first -- then runs page B's softmax while it runs.  The pair's P V GEMMs finish sooner, page
B's stage is held 3,355 instead of 3,720 cycles from its S to its release, and the ring that sets the pair turns
faster.  Run 22's probe (kind ``sm90_seesaw_pair_stale_vr``, self-check beside
v35_cute on the H200): spec 842.2 vs 871.0 us (-3.3%), decode 70.9 vs 73.4 us (-3.4%); the probe's pair
5,840 vs 6,063 cycles.  (Page B's softmax first, kind ``sm90_seesaw_pair_stale``, measured within the noise:
it moved page A's release ~1,000 cycles later.)

The stale max is exact unless a row's max rises by more than ~120 (log2 units) inside a pair.  Such a row ends
with a total < 0.5 beside a finite max, or a total or an O part that is not finite
(tests/test_seesaw_algebra.py::test_stale_max_*), and every rise past 100 is flagged as it happens (a factor
flushed to 0 as a subnormal would hide it); the first kernel makes such a row's lse NaN, and a second launch of
v35_cute's exact kernel recomputes the tiles it poisoned.  With one split (spec) the first kernel also sets a
per-tile int32 flag and the redo is v46_cute's persistent loop over the flagged tiles (kind
``sm90_seesaw_pair_persist_redo``: one wave of CTAs, one flag load per warp, each flag zeroed as its tile is
taken); otherwise (decode's merged pairs, split partials) it is the full grid guarded by the output lse (kind
``sm90_seesaw_pair_c3early_redo``: each CTA reads its tile's 64 lse values and exits unless one is NaN).

Prediction (before its first H200 run): correct on every test, including the max-rise test that forces the
redo; decode 71-74 us (the probe's 70.9 plus one wave of 128 guard CTAs); spec 843-847 us (the probe's 842.2 plus
one wave of 132 redo CTAs that find nothing flagged: a launch, one load per warp, an exit).
Measured (run 23, harness, three calls): spec 849.3 / 841.0 / 849.9 us beside v35_cute's 870.9 / 865.7 /
871.0 (-2.4% to -2.9%); decode 73.7 / 74.5 / 73.9 beside 73.3 / 73.3 / 73.5 (the redo launch eats the stale max's
decode gain: ncu 68.4 + 2.5 us against v35_cute's 69.6).  v59_cute keeps this kernel for spec only.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with the stale-max pair (one O rescale per pair, P_A V_AR first) and an exact redo launch"
FEATURES = EVICT_FEATURES + ("stale-max-pair-softmax", "split-pair-dsmem-merge", "tma-store-epilogue",
                             "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v57_cute", "sm90_seesaw_pair_stale_redo", CONFIG)
