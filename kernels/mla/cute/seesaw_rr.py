"""v51_cute: v35_cute's pair with each KV block reloaded by its last reader, not by the producer.

Every seesaw kind so far hands a page back through the pipeline's empty barriers: each consumer
warpgroup arrives when it is done with a block, the producer warp waits for both arrivals, then
arms the full barrier and issues the TMA copy.  The probes (runs 10-18) put ~90 cycles of handshake
on every slot and show the pair waiting for page A at its start (v35_cute: the producer gets page
A's last slot ~400 cycles after its last release, and the next S_A is issued ~1,080 cycles into the
pair).  FlashMLA has no producer: the reader that frees a block reloads it.

That needs every block of a page to have one last reader known at trace time.  With nine 64-dim
blocks (``kv_chunks = 9``: V_L is blocks 0-3, V_R 4-7, the RoPE dims 8) and v35_cute's order
(WG0: S_A, P_A V_AL from registers, P_B V_BL from page B's RoPE block; WG1: S_B, P_A V_AR from page
A's RoPE block, P_B V_BR from registers), the data dependencies give one:

* page A (ring stage 0): blocks 0-3 are read by S_A and P_A V_AL only, so WG0 reloads them once its
  P_A V_AL is done; blocks 4-8 (V_R, and P_A in block 8) are read last by WG1's P_A V_AR, which
  cannot start before S_A is done (it needs P_A), so WG1 reloads them;
* page B (stage 1): blocks 4-7 are read by S_B and P_B V_BR, both WG1's; blocks 0-3 and block 8
  (which holds P_B, written after S_B) are read last by WG0's P_B V_BL.

So the release points of v35_cute's loop become reload points: once all four warps of the releasing
warpgroup are past their wgmma wait (a warpgroup barrier: each warp's wait covers only its own part of
the GEMM), its first warp arms each owned block's full barrier and issues its TMA copy for the next pass
of that stage (page ``pa + 2 + stage``), and does nothing for blocks the other warpgroup owns.  The
producer loads only the first pass (the first two pages), then Q is its only other job.  The empty barriers are never
waited on again.  The consumers' waits on the full barriers are unchanged (pass k waits parity
k % 2): a block's next load can complete only after its owner's last read of this pass, and every
read of the other warpgroup precedes that by the dependencies above, so no warpgroup ever waits on a
phase that has already moved on.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.seesaw_ops import BAR_WG
from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla.cute.sm90_parts import D_QK, D_V, WG


class MlaSplitSm90SeesawPairReaderReloads(MlaSplitSm90SeesawPairC3Early):
    """v51_cute: v35_cute with nine blocks per page, each reloaded by its last reader (``reader_reloads``)."""

    kv_chunks = 9
    reader_reloads = True

    def _reload_owner(self, stage: int, j: int) -> int:
        """The warpgroup that reads block ``j`` of the page in ``stage`` last (module docstring)."""
        if self.kv_chunks != D_QK // 64:
            raise ValueError(f"{type(self).__name__}: reader_reloads assumes 64-dim blocks (kv_chunks = "
                             f"{D_QK // 64}), not {self.kv_chunks}; set kv_chunks = {D_QK // 64}.")
        v_l = j < D_V // 2 // 64
        if stage == 0:
            return 0 if v_l else 1
        return 1 if (not v_l and j < D_V // 64) else 0

    def _check_reader_reloads(self) -> None:
        """(trace time) Refuse the flags whose releases are not last reads (a reload there would overwrite a
        block another warpgroup still reads)."""
        self._refuse_flags("reader_reloads", {
            "early_issue": self.early_issue, "early_release": self.early_release,
            "release_unread": self.release_unread, "wg1_free_unread_a": self.wg1_free_unread_a,
            "m0_first": self.m0_first, "wg1_softmax_first": self.wg1_softmax_first,
            "wg1_provisional": self.wg1_provisional, "wg1_publish_first": self.wg1_publish_first,
            "stagger": self.stagger, "chunk_order": self.chunk_order,
            "pair_load_order": self.pair_load_order, "the persistent loop": self.looping,
            "own_p_rs off (P_A V_AL and P_B V_BR would read P from the pages)": not self.own_p_rs,
            "cluster multicast": self.cluster > 1}, "turn those off or use a producer-loaded kind.")

    def _mark_pair(self, c: int, pa, p_end) -> None:
        """(trace time, at the top of each pair loop's body) Check the flags, and read the next pair's two pages
        from the block table now, so that the reload after a wgmma wait does not wait for a global load
        (clamped into the split: the reload itself is skipped past its end)."""
        self._check_reader_reloads()
        super()._mark_pair(c, pa, p_end)
        _, _, _, mBT, bi = self._kv_reload
        self._rr_pages = self._pair_block_ids(mBT, bi, cutlass.min(pa + 2, p_end - 1), p_end)

    @cute.jit
    def _release_blocks(self, kv_pipe, stage: cutlass.Constexpr, ph, blocks: cutlass.Constexpr):
        """The releasing warpgroup reloads the blocks it reads last, for the next pass of ``stage``."""
        c, pa, p_end = self._rr_at  # (trace time) set by the pair loop this call sits in
        mine = tuple(j for j in blocks if self._reload_owner(stage, j) == c)
        if cutlass.const_expr(len(mine) > 0):
            tma_kv, tKgK, tKsK, _, _ = self._kv_reload
            page = self._rr_pages[stage]
            if pa + 2 + stage < p_end:
                # a warp's wgmma wait covers only its own part of the warpgroup's GEMM (its rows of P, and its
                # reads of the V blocks): all four warps must be past theirs before the blocks are overwritten
                cute.arch.barrier(barrier_id=BAR_WG + c, number_of_threads=WG)
                # the warpgroup's first warp (warp-uniform, so ptxas keeps the wgmma asynchronous)
                if cute.arch.make_warp_uniform(cute.arch.warp_idx()) % 4 == 0:
                    for i in cutlass.range_constexpr(len(mine)):
                        slot = stage * self.kv_chunks + mine[i]
                        kv_pipe.sync_object_full.arrive(slot, None)  # one elected thread arms it with the bytes
                        self._kv_copy(tma_kv, tKgK[(None, 0, mine[i], page)], tKsK[(None, slot)],
                                      kv_pipe.sync_object_full.get_barrier(slot))


class MlaSplitSm90SeesawPairReaderReloadsLate(MlaSplitSm90SeesawPairReaderReloads):
    """v52_cute: v51_cute with WG1's reload of page A issued beside its P_B V_BR (``wg1_release_a_after_vbr``)."""

    wg1_release_a_after_vbr = True


class MlaSplitSm90SeesawPairReaderReloadsVrFirst(MlaSplitSm90SeesawPairReaderReloadsLate):
    """v53_cute: v52_cute with S_B reading page B's blocks in the order their reloads go out (``page_b_order``):
    V_R (4-7, WG1 after P_B V_BR) first, then the RoPE block and V_L (8, 0-3, WG0 after P_B V_BL)."""

    page_b_order = (4, 5, 6, 7, 8, 0, 1, 2, 3)
