"""v48_cute: v45_cute with m1 published before P_B is stored, and P_B V_BL queued behind P_A V_AR (``m1_first``).

Run 17's scaling run put FlashMLA's lead on spec in its cost per page (5.9% below v35_cute's), and a read of
its sm90 kernel (not copied) showed the B-first order of v44/v45_cute with two differences in the handoff.
First, WG1 publishes the pair's max m1 before it stores P_B. WG0 needs only m1 to scale and store P_A for
WG1, and P_B only later, for P_B V_BL. Second, WG0 queues P_B V_BL only after WG1 has queued P_A V_AR, so
the tensor pipe runs P_A V_AL, P_B V_BR, P_A V_AR, P_B V_BL.

v45_cute's probe (run 16) showed both gaps:
- m1 reached WG0 with P_B, ~320 cycles after the softmax (4,154 -> 4,478).
- P_A V_AR was issued ~300 cycles after P_A arrived (5,282 -> 5,584), behind P_B V_BL. So page A, whose last
  reader is P_A V_AR, came back to the producer at 6,677, and the next S_A waited for it (issued 1,890
  cycles into the pair).

Here WG1's barrier S1 carries m1 alone. WG1 then stores P_B, rescales O_R once, issues P_B V_BR, waits for P_A
(S0), issues P_A V_AR and arrives on barrier 9 (BAR_VR). WG0 waits on barrier 9 before it issues P_B V_BL.
Each named barrier has one arrival and one wait per pair, in that order, so the barriers stay one-deep (a
helper's protocol review found no hang, reuse or ordering problem). In this kind's probe, event 5 is m1
(published by WG1, arrived at WG0), not P_B, and the trace prints it so (``trace_events``); WG1's event 9
still stamps P_B stored.

Prediction (before any GPU run; compile check: 168 registers, no spills, the trial kernels' wgmma not
serialised; the partial-output kernel of the fuzz shapes with more than two splits is serialised like
v44/v45_cute's (C7520); v44/v45_cute's PTX unchanged by the flag):
- The probe: P_A published ~300 cycles sooner, and P_A V_AR issued ~600 sooner. Page A's last slot returns
  ~450 cycles sooner, and page B's ~450 later (P_B V_BL now runs last). Page B is reloaded into chunks that
  P_B V_BL reads, so this trades one late page for the other.
- Spec: 875-900 us, 0.5-3% below v45_cute's 904, and not below v35_cute. FlashMLA's other differences are
  missing here: P outside the KV pages, 64-dim chunks reloaded by their last reader, and the next S queued
  behind the current P V.
- Decode follows the same pair.
Measured (run 18, devlog): correct (self-check: trials + 7 fuzz shapes; harness: correctness, fuzz, trials).
Spec 900.4 / 901.4 us (compare / harness) against v35_cute's 869.5 / 869.9 in the same call (v45_cute: 904.1 /
903.6 in run 16); decode 76.0 / 76.0 (v35_cute 73.7 / 73.3). The top of the predicted range, ~0.3% below
v45_cute: a miss. The probe did what the order promised for page A (P_A published 3,900 instead of 4,946 cycles
into the pair, P_A V_AR issued 4,671 instead of 5,584, page A's last slot 5,622 instead of 6,677, the next S_A
690 cycles sooner) and page B came back sooner too (first slot 6,030, not later), but the pair only went 6,215 ->
6,135 cycles: the chain inside it grew ~580 cycles, because WG1 stores P_B and issues P_B V_BR before it takes
P_A (taken at 4,443) and P_B V_BL waits for P_A V_AR's issue. Not kept.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v45_cute"
DESCRIPTION = "v45_cute with m1 published before P_B's store and P_B V_BL queued behind P_A V_AR (FlashMLA's pipe order)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v48_cute", "sm90_seesaw_pair_bfirstm1", CONFIG)
