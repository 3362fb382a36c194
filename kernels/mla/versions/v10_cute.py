"""v10_cute: v9_cute with the combine fused into the split kernel (no second launch on decode).

Decode runs 2 KV splits per (sequence, 64-row block); v5_cute..v9_cute then launch a combine
kernel that reads the fp32 partials back (9.9 us of v5_cute's 96.4 us in its H200 profile, most
of it launch gap and a kernel too small to fill the GPU).  Here each split CTA stores its
partial as before, makes it visible GPU-wide and counts itself in on a per-(sequence, row block)
counter; the CTA that arrives last merges: its own O is still in registers, it reads only the
other splits' partials and writes the bf16 output and the lse.  The counters are zeroed by the
host in stream order before each launch.  Spec (one split, direct epilogue) is unchanged.

Prediction (before the H200 run): decode -6 to -9 us against v9_cute (the combine launch and its
re-read of this CTA's own partial disappear; the last CTA adds ~1-2 us of tail for 128 KB of
reads); spec equal to v9_cute within noise.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, SEESAW_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v9_cute"
DESCRIPTION = "v9_cute with the split combine fused: the last CTA per row block merges (no combine launch)"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SEESAW_FEATURES + ("per-block-tma-barriers",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v10_cute", "sm90_seesaw_fused", CONFIG)
