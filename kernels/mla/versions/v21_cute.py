"""v21_cute: v19_cute with the row blocks of a (sequence, split) paired in a 2-CTA cluster, each KV block multicast.

Both row blocks of a (sequence, split) -- decode has exactly two, spec 32 -- read the same pages.
v19_cute loads every 64 x 64 block once per CTA: 2x (decode) the cache's bytes cross L2 -> SM, and
on spec the second reader often misses L2 (ncu: 378 MB read from DRAM for a 151 MB cache).  Here
the two CTAs of a cluster each issue the TMA for half of a block and multicast it to both; a
block's empty barrier counts the consumer warps of both CTAs, so a slot is refilled only when both
row blocks are done with it (the pair runs in lockstep).  Shapes whose row blocks do not pair up
(odd count) run v19_cute's kernel.

Prediction (before the H200 run): decode split kernel 71 -> 62-67 us (decode 79.5 -> 71-76 us),
spec 941 -> 900-930 us; risk: lockstep (the slower CTA of a pair sets the pace) eats the gain.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v19_cute"
DESCRIPTION = "v19_cute with row-block pairs in a 2-CTA cluster and every KV block TMA-multicast to both"
FEATURES = EVICT_FEATURES + ("tma-multicast-row-block-pair",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v21_cute", "sm90_seesaw_mcast", CONFIG)
