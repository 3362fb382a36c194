"""v51_cute: v35_cute with each 64-dim KV block reloaded by the warpgroup that reads it last (no producer round trip).

Runs 12-18 kept finding the pair waiting for page A at its start: in v35_cute's probe the next S_A is issued ~1,080
cycles into the pair, and the producer gets page A's last slot back ~400 cycles after the consumers' last release
(an empty-barrier wait, an expect_tx and the TMA issues per slot, one slot after another on one thread). v50_cute
showed the other side: nine blocks per page through that producer cost 683 cycles on page A's last slot. FlashMLA
has no producer warpgroup: the reader that frees a block reloads it. Here (``_cute_seesaw_rr``):
- Nine 64-dim blocks per page (``kv_chunks = 9``), so every block has one last reader in v35_cute's order. Page A:
  blocks 0-3 (V_L) are reloaded by WG0 right after its P_A V_AL, blocks 4-8 (V_R, and P_A in block 8) by WG1 after
  its P_A V_AR. Page B: blocks 4-7 by WG1 after its P_B V_BR, blocks 0-3 and 8 (P_B is stored there) by WG0 after
  its P_B V_BL.
- Once all four warps of the releasing warpgroup are past their wgmma wait (a warpgroup barrier: a warp's wait
  covers only its own part of the GEMM, as a helper's review of the protocol pointed out), its first warp arms each
  owned block's full barrier and issues its TMA copy for the next pass of that stage (an elected thread each, as
  the producer does). The producer loads only the first two pages.
- Everything else is v35_cute's: the pipe order, P_A / P_B in the pages' RoPE blocks, the TMA-store epilogue, the
  decode kernel's pair merge.
Compile check (CPU, `tools/cute_compilecheck.py sm90_seesaw_pair_rr:{16:128:direct,1:128:direct:paired,5:32:direct,
16:64:direct,1:16:direct,1:128}`): 168 registers, no spills; the trial kernels' wgmma are not serialised, while the
partial-output kernel of fuzz shapes with more than two splits (`1:128`) is (C7520), as v48/v50_cute's are. The PTX
has one elected `mbarrier.arrive.expect_tx` + `cp.async.bulk.tensor` per reloaded block in the consumers, and the
next pass's two page indices are read from the block table at the top of each pair (not after the wgmma wait). The
pair loops are 1,152 / 1,235 SASS instructions (v35_cute: 1,001 / 1,092) with 2 R2UR each (v35_cute: 0). The PTX
of 16 existing kind/shape pairs (v35, v46, v49_cute's kinds, ownp_evict, sm90, c3early's probe) is unchanged. Its
probe twin (``sm90_seesaw_pair_rr_trace``) compiles unserialised, with the pair's events but no producer words (a
stamp beside the reloads made ptxas serialise it; the analysis then prints no producer rows).
Prediction (before any GPU run): page A's V_L blocks go out ~1,100 cycles sooner than v35_cute's producer slots
(after P_A V_AL instead of after the producer's handshake) and its V_R blocks ~1,000 sooner, so S_A should no
longer wait at the pair start (~350 cycles of v35_cute's 6,069-cycle pair); the extra consumer instructions and
the nine waits per S give some back. Spec 845-870 us (-3% to 0% against v35_cute), decode within +-2% (its pages
come from DRAM, where v33_cute's handshake change did not move it). A correctness failure would show a block
reloaded before its last read (a wrong owner); a hang, a reload never issued.
Measured (run 19, devlog): correct (self-check, fuzz, harness); spec 900.8 / 904.2 us against v35_cute's 865.2 /
865.9 in the same call (compare / harness, +4.1%), decode 71.5 / 72.2 (a tie). Prediction missed: the probe's pair
grew 6,062 -> 6,227 cycles; the reloads go out at most ~150 cycles before v35_cute's producer slots, while the nine
chunks delay S_A by ~290 cycles and put WG1 behind WG0 (kv-page-chunk-barriers, run 19 pitfall).
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import EVICT_FEATURES, SEESAW_CONFIG, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v35_cute"
DESCRIPTION = "v35_cute with nine KV blocks per page, each reloaded by the warpgroup that reads it last (no producer)"
FEATURES = EVICT_FEATURES + ("split-pair-dsmem-merge", "tma-store-epilogue", "kv-page-chunk-barriers")
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v51_cute", "sm90_seesaw_pair_rr", CONFIG)
