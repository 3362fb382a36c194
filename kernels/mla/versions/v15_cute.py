"""v15_cute: v12_cute's algebra with the staggered seesaw schedule (``_cute_stagger``).

Run 5 left v12_cute at 1.9 us per page on spec and 2.2 on decode against ~1.23 us of tensor
work, and named the cause: a pair's stages turn over only after both P V of a page, so the next
page's load starts ~0.6 us before its S needs it, and WG0's softmax of page A runs while the
tensor pipe holds nothing (both S were issued together).  FlashMLA's sm90 kernel staggers the
warpgroups instead; this version rebuilds that timing in our CTA (one design, three parts that
only work together): own P from registers (rs-wgmma), WG0's next S_A queued behind its last P V
while WG1's S_B follows its own P V, and every 64 x 64 block released at its last reader and
loaded in the order blocks come free (A's rope and left-V blocks first).

Prediction (before the H200 run): spec 956 -> 860-900 us, decode 81.9 -> 72-78 us; ncu tensor
pipe 59% -> 65-70% on decode.  Risk: ptxas serialising the rs-wgmma (P registers it cannot prove
untouched), which would show as no gain on spec.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, OWNP_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v12_cute"
DESCRIPTION = "v12_cute with FlashMLA's staggered seesaw: own P from registers, blockwise release + load order"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = OWNP_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v15_cute", "sm90_stagger", CONFIG)
