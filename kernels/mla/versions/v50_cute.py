"""v50_cute: v49_cute with each KV page loaded as nine 64-dim chunks, aligned to the O halves (FlashMLA's split).

With three 192-dim chunks (v33_cute on), the middle chunk holds the top of V_L and the bottom of V_R, so it
comes back only after both warpgroups' P V. Nine 64-dim chunks (``kv_chunks = 9``, each with its own barrier,
as in v9..v32_cute) line up with the O halves:
- Page A: chunks 0-3 (V_L: S_A and P_A V_AL only; WG1 gives them back at M0) return after P_A V_AL. That is 16
  of the next S_A's 36 k-steps, where the three chunks gave 12.
- Page B: chunks 4-8 (V_R and RoPE, with P_B in the P tile as in v49_cute) return after P_B V_BR. The
  producer loads them right after page A's 0-3 (``pair_load_order``: A0-3, B4-8, A4-8, B0-3), and the next
  S_B reads them first (``page_b_order``). That is 20 of its 36 k-steps, where three chunks gave 12.

The cost is the one v33_cute removed: 18 acquires and TMA issues per pair on the producer's single thread (run
10: ~950 cycles for nine), and three times the consumers' barrier waits. In the A-first order (v32 -> v33_cute)
three chunks were 3% faster. There, every chunk of a page came back at the same time, so finer chunks bought
nothing.

Prediction (before any GPU run; compile check of spec, decode and four fuzz shapes: 168 registers, no spills,
pair loops of 1,106 / 1,010 instructions with no R2UR; the trial kernels' wgmma are not serialised, while the
partial-output kernel of fuzz shapes with more than two splits is, as in v44/v45_cute): spec -2% to +3%
against v49_cute.
The probe's S_A / S_B issue times against v49_cute's say whether the earlier chunks or the extra barriers win.
Decode follows the same pair.
Measured (run 18, devlog): correct. Spec 921.5 / 922.4 us (compare / harness), +4.5% against v49_cute's
882.0 / 882.3: outside the predicted -2 to +3%, a miss. Decode 74.7 / 77.3 (v49_cute 74.6 / 74.2). The probe
shows both sides of the bet: the next S_B was issued 266 cycles sooner than v49_cute's (the early chunks work),
but the producer's 18 acquires per pair put page A's last slot 683 cycles later (5,627 -> 6,310), and the pair
grew 6,135 -> 6,381 cycles. Nine chunks pay only with loads issued by each chunk's last reader (FlashMLA's
design), not through one producer thread. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v49_cute"
DESCRIPTION = "v49_cute with nine 64-dim KV chunks aligned to the O halves, each back after its last reader"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v50_cute", "sm90_seesaw_pair_bfirstpb9", CONFIG)
