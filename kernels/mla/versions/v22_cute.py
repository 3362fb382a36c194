"""v22_cute: v19_cute with each pair of KV splits merged in a 2-CTA cluster (no combine kernel at 2 splits).

Decode runs 2 splits per (sequence, row block) to fill the SMs; v19_cute stores two fp32
partials (16.8 MB) and a second kernel merges them (ncu: 7.1 us, plus the gap between the two
kernels).  Here the two split CTAs are one cluster: after their pages each sends the half of O
the other finishes (64 KB, normalised, with the rows' lse) into the peer's shared memory
(distributed shared memory, thread to same thread), and each writes its merged half of the bf16
output (``_cute_seesaw_pair``).  Spec runs one split: v19_cute's kernel unchanged.

v10_cute fused the combine through global memory (fence, atomic counter zeroed by a memset, the
last CTA reads the other partials) and measured +3.9%; the differences here: no memset launch, no
counter or GPU-scope fence, the peer's O arrives in shared memory instead of L2, and the merge
reads it one 64-value row at a time (no second 128-register fragment next to O).

Prediction (before the H200 run): decode 79.5 -> 71-74 us (combine 7.1 us and ~1.4 us of
inter-kernel gap gone, ~1-2 us of cluster barriers + 64 KB each way over DSMEM + merge added at the
end of each pair), spec unchanged (941 us).  Risk: DSMEM bandwidth (published figures
suggest tens of GB/s per SM pair: 64 KB each way would then cost 1-3 us).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v19_cute"
DESCRIPTION = "v19_cute with each pair of KV splits merged through distributed shared memory in a 2-CTA cluster"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge",)
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v22_cute", "sm90_seesaw_pair", CONFIG)
