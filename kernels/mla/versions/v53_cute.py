"""v53_cute: v52_cute with S_B reading page B's blocks in the order their reloads go out (V_R first).

With the reloads of v51/v52_cute, page B's V_R blocks (4-7) go out when WG1's P_B V_BR is done, and its V_L and
RoPE blocks (0-3, 8) only when WG0's P_B V_BL is, the pair's last GEMM (in v35_cute's probe P_B V_BR was done ~500
cycles before P_B V_BL). S_B reads the blocks in index order, so the next S_B would start on the blocks reloaded
last. Here S_B reads (4, 5, 6, 7, 8, 0, 1, 2, 3) (``page_b_order``), giving the late blocks 5 of S_B's 9 k-blocks
(~640 cycles of S_B at full rate) more time to land. The producer's first pass, which loads page B as 0-8, is not
affected: S_B waits block by block. (``page_b_order`` without ``pair_load_order`` is refused for producer-loaded
kinds, whose later passes would be held up by it; the reader-reload kinds load only the first pass there.)
Compile check (CPU, the same six shapes and the probe twin as v52_cute): 168 registers, no spills, the trial kernels
and the probe twin not serialised (the partial-output kernel `1:128` is, as v51/v52_cute's).
Prediction (before any GPU run): 0 to -1.5% on spec against v52_cute; nothing if page B's blocks land before the next
S_B anyway (the probe's S_B issue time answers it). Decode as v52_cute.
Measured (run 19, devlog): correct; spec 927.8 / 930.4 us against v52_cute's 902.8 / 901.2 (compare / harness,
+2.8%), decode 72.0 / 72.2. Prediction (0 to -1.5%) missed: the probe's pair is 6,764 cycles; reading V_R first
moved S_B earlier (1,904 vs 2,228 cycles) but page A's blocks later (S_A at 1,824).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v52_cute"
DESCRIPTION = "v52_cute with S_B reading page B's V_R blocks first, the order their reloads go out"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v53_cute", "sm90_seesaw_pair_rrvr", CONFIG)
