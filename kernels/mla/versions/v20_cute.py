"""v20_cute: v19_cute with Q's first two 64-dim blocks held in registers (rs-wgmma for 8 of S's 36 k-steps).

S = Q K^T is an m64n64 wgmma chain with both operands in shared memory: per k16 step it reads
2 KB of Q and 2 KB of K in the 32 cycles the tensor core needs, i.e. the whole 128 B/cycle of an
SM's shared memory, while TMA writes the next pages (~25 B/cycle) into the same banks.  Each
consumer warpgroup has ~60 registers left under its 232 (v19_cute's consumer peaks near 170):
two Q blocks as A fragments take 32, and those k-steps read only K from shared memory.

Prediction (before the H200 run): if S is shared-memory bound, spec -2 to -4% and decode -1 to
-3% vs v19_cute; if S runs at the tensor core's rate already, no change (then the registers are
better spent elsewhere).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v19_cute"
DESCRIPTION = "v19_cute with Q's first two 64-dim blocks in registers (rs-wgmma QK^T for 8 of 36 k-steps)"
FEATURES = EVICT_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v20_cute", "sm90_seesaw_qregs", CONFIG)
