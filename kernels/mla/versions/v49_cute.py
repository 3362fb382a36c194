"""v49_cute: v48_cute with P_B in the CTA's own 8 KB P tile, and page B's chunk outside V_L loaded and read first.

In v44..v48_cute, P_B is stored in page B's RoPE block, so WG0's P_B V_BL is the last reader of every chunk of
page B. With FlashMLA's pipe order (v48_cute), P_B V_BL runs last, so all of page B comes back last, and the next
S_B waits for it. In run 16's probe, v45_cute's S_B was issued 3,080 cycles into the pair, against v35_cute's
2,254.

FlashMLA keeps P out of the KV tiles, and each chunk is reloaded by its last reader. Here P_B goes into the
CTA's 8 KB P tile, which the seesaw kinds had left unused (``p_b_buffer``). Page B's third chunk (dims 384-575:
V_R's upper half and the RoPE dims) is then read only by S_B and P_B V_BR. So:
- WG0 gives that chunk back at barrier S1 (after a wait on its full barrier, which ties the release to this
  pass), and WG1 gives it back after P_B V_BR. It comes free second in the pipe, not last.
- WG1's S_B reads page B's chunks in the order (2, 0, 1) (``page_b_order``), so the next S_B starts on the
  chunk that came back first.
- The producer loads each pair's chunks in the order they come free (``pair_load_order``): A0 (after P_A V_AL),
  B2 (P_B V_BR), A1, A2 (P_A V_AR), then B0, B1 (P_B V_BL). An in-order producer going page by page would hold
  B2 behind A1 and A2, as a helper's review pointed out. The same review found no hang or race in the
  protocol: each chunk is released once per warpgroup per pass, and all of pair k's loads are issued before
  any of pair k+1's.

Page A is unchanged: its chunk 0 comes back after P_A V_AL, chunks 1-2 after P_A V_AR. The P tile is reused every
pair. WG1 writes P_B of pair k+1 only after barrier M0 of pair k+1, and WG0 arrives there only after its P_B V_BL
of pair k has completed.

Prediction (before any GPU run; compile check of spec, decode and four fuzz shapes: 168 registers, no spills,
no serialised wgmma, pair loops of 1,057 / 969 instructions with no R2UR; the PTX of v35, v37, v38, v46 and
v48_cute's kinds is unchanged by the new producer and S-order code):
- The probe: next page B's first slot ~1,000 cycles sooner than in v48_cute, and S_B issued sooner.
- Spec: 860-890 us, 1-3% below v48_cute. It is below v35_cute only if the pair drops under ~6,000 cycles.
- Decode follows the same pair.
Measured (run 18, devlog): correct; no kernel serialised, as the compile check said. Spec 882.0 / 882.3 us
(compare / harness), 2.0% below v48_cute's 900.4 / 901.4 and inside the predicted 860-890, but 1.4% above
v35_cute's 869.5 / 869.9 in the same call; decode 74.6 / 74.2 (v35_cute 73.7 / 73.3). The probe: page B's
first slot 996 cycles sooner than v48_cute's (predicted ~1,000) and S_B issued 145 sooner, while page A, now
loaded beside B2, landed later (S_A issued 1,729 vs 1,201 cycles into the pair); median pair 6,135 cycles in
both, page loop -1.2%. Not kept: the B-first line stays behind the A-first v35_cute.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v48_cute"
DESCRIPTION = "v48_cute with P_B in the CTA's own P tile and page B's chunk outside V_L reloaded and read first"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v49_cute", "sm90_seesaw_pair_bfirstpb", CONFIG)
