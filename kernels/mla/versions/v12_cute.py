"""v12_cute: v9_cute's split kernel with a combine that gives each folded row one warp.

v9_cute's decode profile on the H200: split kernel 70.3 us, combine 9.9 us (12% of the trial)
for ~21 MB moved (~2.1 TB/s, most of it from L2, where the partials were just written).
``_cute_combine`` launches 4096 CTAs of 128 threads, one per (row, sequence), each a chain of
dependent loads.  ``_cute_combine3`` merges a row per warp (each lane four 16-byte vectors per
split, every split's lse and partial loaded in one pass, running-max merge) and eight rows per
CTA: 512 CTAs on the decode trial.  Spec runs one split (direct epilogue) and is unchanged.

Prediction (before the H200 run): combine 9.9 -> 4-6 us, decode 82-84 -> 77-80 us; spec equal
to v9_cute within noise.  (v7_cute's one-pass combine of bf16 partials did not gain: if this one
does not either, the combine's time is launch/scheduling, not its load chain.)
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v9_cute"
DESCRIPTION = "v9_cute with a warp-per-row combine (8 rows per CTA, one-pass online merge, 16-byte loads)"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers", "warp-per-row-combine",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v12_cute", "sm90_seesaw_wcomb", CONFIG)
