"""v32_cute: v28_cute with P written in wgmma's no-swizzle K-major layout, so its store addresses are immediates.

Run 11's SASS of v28_cute's page softmax (the chain every pair waits on: ~230 instructions, ~900
cycles) has ~50 integer instructions rebuilding the 16 128B-swizzled shared-memory addresses of
the P store every pair, although they never change (WG c always writes stage c's RoPE block); a
source-level hoist did not survive ptxas, which recomputed them rather than keep 16 registers.
Here the RoPE block takes P in the interleaved layout (8 x 16-byte core matrices, 128 contiguous
bytes each; the other warpgroup's P V reads it through a descriptor built from the same tensor):
every store is `STS [base + immediate]`, still conflict-free (a warp's store fills whole core
matrices).  SASS: 3488 instructions instead of 3592, the softmax-to-publish span 468 instead of
522; no spills; the PTX of every other kind unchanged.

Prediction (before the H200 run; built and compile-checked in run 11, not yet run): if the
softmax's instructions are what the pair waits on (run 11's open question), each softmax ~-150 to
-250 cycles and the pair -4 to -7% (spec 904 -> 845-870 us, decode 74.5 -> 70-72 us); if P's operand
data is, within the noise.

Measured (run 12, devlog): correct; harness 75.3 / 913.0 us vs v28_cute 75.2 / 912.7, compare 74.9 /
907.1 vs 75.7 / 912.7 -- within the noise; the softmax's arithmetic ended at the same cycle, only the
P store's span shrank.  Discarded.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v28_cute"
DESCRIPTION = "v28_cute with P in the no-swizzle K-major layout: one base register plus immediates per store"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v32_cute", "sm90_seesaw_pair_pinter", CONFIG)
