"""CuTe DSL MLA split kernel for Hopper, "seesaw" schedule: one consumer warpgroup per page.

Same CTA as ``_cute_sm90`` (producer warpgroup + TMA + 2-stage mbarrier pipeline, 64 query rows,
WG ``c`` owning O columns ``[256c, 256c + 256)``), but the pages are taken in pairs (A, B) and
each consumer warpgroup computes the *whole* 64 x 64 S of one page: WG0 ``S_A = Q K_A^T``, WG1
``S_B = Q K_B^T`` (m64n64 wgmma, 36 k-steps).  That removes v5_cute's two costs measured on the
H200: the m64n32 QK^T (A+B read from shared memory at 1.5x what the tensor core consumes) and
the softmax that ran while no tensor work was queued.  Here one warpgroup's softmax runs while
the other's GEMMs execute.

The running max ``m`` is shared.  Per pair, with ``e(x) = exp2(x * scale_log2)``:

* WG0: ``S_A``; ``m0 = max(m, rowmax S_A)``; ``P_A = e(S_A - m0)``; publish ``m0`` and ``P_A``
  (barrier S0); ``O_L = O_L e(m - m0) + P_A V_AL``; wait for WG1's ``m1`` (barrier S1);
  ``O_L = O_L e(m0 - m1) + P_B V_BL``.
* WG1: ``S_B`` (overlaps WG0's ``S_A``); wait S0; ``O_R = O_R e(m - m0) + P_A V_AR`` (issued
  at once, overlaps WG1's softmax); ``m1 = max(m0, rowmax S_B)``; ``P_B = e(S_B - m1)``; publish
  ``m1`` and ``P_B`` (barrier S1); ``O_R = O_R e(m0 - m1) + P_B V_BR``.

Both halves of O and both row-sum halves end every pair relative to ``m1``, so the epilogue
adds the two row sums.  Only the maxima cross between the warpgroups (two smem slots, one per
writer); the scales are recomputed from them, bit-identical in both warpgroups.

P of a page lives in that page's RoPE block (its last 64 dims, 8 KB, same K-major 128B-swizzled
64 x 64 layout as a P tile): those dims only feed that page's QK^T, which is complete before P is
written, and the stage is released only after both P V of the page -- so no extra P buffer.
An odd last page is a pair without B: WG1 runs its softmax on an all ``-inf`` S (scale 1, P 0)
and neither warpgroup issues a P V for B.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.seesaw_ops import BAR_M0, BAR_S0, BAR_S1, BAR_SOLO, BAR_SUM, BAR_VR, BAR_WG, WG, SeesawOps
from kforge_kernels.mla.cute.sm90 import MlaSplitSm90
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, CONSUMERS, D_QK, D_V, PAGE, _mn_view, _quad_reduce

__all__ = ["BAR_S0", "BAR_S1", "BAR_SUM", "BAR_VR", "BAR_WG", "WG", "CONSUMERS"]


class MlaSplitSm90Seesaw(SeesawOps, MlaSplitSm90):
    """v8_cute: v5_cute's CTA with the seesaw schedule (one whole-page S per warpgroup)."""

    pv_first = True
    seesaw = True
    qk_cols = PAGE
    #: queue each WG's next GEMM before its previous one completes (v11_cute)
    early_issue = False
    #: a warpgroup's P V of its own page reads P from registers (rs-wgmma) instead of shared memory (v18_cute)
    own_p_rs = False
    #: WG1 runs page B's softmax before queueing P_A V_AR, then both its P V from registers (v25_cute)
    wg1_softmax_first = False
    #: give KV blocks back at each warpgroup's last use of them, not at the end of its page (v26_cute)
    early_release = False
    #: only WG0's half of ``early_release``: it gives page A back once P_A V_AL is done, before waiting for
    #: P_B (safe with any ``kv_chunks``; WG1's half assumes 64-dim blocks)
    wg0_early_release = False
    #: WG0 gives page A's chunks outside its O columns back right after S_A (v37_cute; with ``chunk_order``
    #: those load first).  Not page B's: its last chunk holds P_B, which WG0's P_B V_BL reads from there
    release_unread = False
    #: WG1 gives back page A's chunks it never reads (outside its O columns and P_A's RoPE block) right after
    #: barrier S0 (v39_cute): their last reader is then WG0's P_A V_AL, so they refill ~1,000 cycles sooner
    wg1_free_unread_a = False
    #: WG0 publishes m0 (barrier M0) before it converts and stores P_A (barrier S0), so WG1's max adoption and
    #: O_R rescale run beside the P store instead of after it (v40_cute)
    m0_first = False
    #: WG1 gives page A back (v52_cute: reloads its blocks) once P_B V_BR is issued, not before O_R's rescale and
    #: that issue: the reload's warpgroup barrier and TMA issues then run beside P_B V_BR
    wg1_release_a_after_vbr = False
    #: WG0 issues P_A V_AL (P from registers) before it stores P_A for WG1 and arrives on S0 (v42_cute): run 15's
    #: probe had the tensor pipe idle from S_B's end until P_A V_AL, ~400 cycles per pair
    wg0_pv_first = False
    #: probe only (``_cute_ringprobe``): WG1 issues S_B only after WG0's page-A softmax arithmetic
    solo_softmax_probe = False
    #: WG0 issues P_A V_AL only after WG1 issued P_A V_AR, so WG1's issue never waits behind it (v27_cute)
    vr_first = False
    #: WG1 turns S_B into P against its own running max before m0 arrives, then rescales P_B by
    #: e(m1' - m1) (v30_cute): page B's softmax no longer waits for page A's
    wg1_provisional = False
    #: with wg1_provisional: WG1 publishes P_B before it issues P_A V_AR (v31_cute)
    wg1_publish_first = False
    #: P written into the RoPE block in wgmma's no-swizzle (interleaved) K-major layout instead of the
    #: 128B swizzle (v32_cute; built and compile-checked in run 11, not yet run on the GPU)
    p_interleaved = False


    @cute.jit
    def _seesaw_consumer(self, qk_mma, pv_mma, rs_mmas, tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter,
                         q_pipe, kv_pipe, sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2):
        """One CTA's work: the warpgroup's views (``_seesaw_parts``), then its one tile (``_seesaw_tile``)."""
        parts = self._seesaw_parts(qk_mma, pv_mma, rs_mmas, tidx, wg, bi, split, m_block, q_pipe, sQ, sKV, sV, sRed,
                                   mOp)
        self._seesaw_tile(parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mOp, mLp, mOut,
                          mLse, mSem, scale_log2)

    @cute.jit
    def _seesaw_parts(self, qk_mma, pv_mma, rs_mmas, tidx, wg, bi, split, m_block, q_pipe, sQ, sKV, sV, sRed, mOp):
        """The consumer warpgroup's fragments and views of shared memory, and its zeroed O (tile-independent
        for the TMA-store epilogue, which the persistent loop of ``_cute_persistent`` relies on)."""
        c = wg - 1
        ctid = tidx % WG
        thr_qk = qk_mma.get_slice(ctid)
        thr_pv = pv_mma.get_slice(ctid)
        tSrQ = qk_mma.make_fragment_A(thr_qk.partition_A(sQ))  # (MMA, 1, 36, 1)
        pv_rs, qk_rs = rs_mmas
        q_regs = None
        if cutlass.const_expr(self.q_reg_blocks > 0):
            # before the main Q wait (v20_cute as measured), so _q_registers waits for Q itself
            q_regs = (qk_rs, self._q_registers(qk_rs, sQ, ctid, q_pipe))
        tSrK = qk_mma.make_fragment_B(thr_qk.partition_B(sKV))  # (MMA, 1, 36, stages)
        sV_c = cute.local_tile(sV, (D_V // 2, PAGE, self.stages), (c, 0, 0))
        tOrV = pv_mma.make_fragment_B(thr_pv.partition_B(sV_c))  # (MMA, 1, 4, stages)
        # the RoPE block of each stage, reused as that page's P (rows = query rows, cols = tokens)
        sP = cute.local_tile(sKV, (PAGE, D_QK - D_V, self.stages), (0, D_V // (D_QK - D_V), 0))
        if cutlass.const_expr(self.p_interleaved):
            sP = self._p_tiles_interleaved(sKV)
        tOrP = pv_mma.make_fragment_A(thr_pv.partition_A(sP))  # (MMA, 1, 4, stages)
        tPsP = thr_qk.partition_C(sP)  # (MMA, 1, 1, stages)
        tScS_mn = _mn_view(thr_qk.partition_C(cute.make_identity_tensor((BLOCK_M, PAGE))))
        # slots: 0 = m0 (WG0 writes), 1 = m1 (WG1 writes), 2 + c = WG c's row sums
        sh = cute.make_tensor(sRed.iterator, cute.make_layout((4, BLOCK_M), stride=(BLOCK_M, 1)))
        frag_layout = None
        if cutlass.const_expr(self.own_p_rs):
            frag_layout = pv_rs.make_fragment_A(pv_rs.get_slice(ctid).partition_shape_A((BLOCK_M, PAGE))).layout

        tOgO, acc_O = self._o_partition(thr_pv, mOp, bi, split, m_block, c)
        return (c, ctid, qk_mma, pv_mma, thr_qk, thr_pv, tSrQ, q_regs, tSrK, tOrV, tOrP, tPsP, tScS_mn, sh,
                frag_layout, pv_rs, tOgO, acc_O)

    @cute.jit
    def _seesaw_tile(self, parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mOp, mLp, mOut,
                     mLse, mSem, scale_log2, q_state=None, ph0=None):
        """One (sequence, row block, split) tile: the pair loop over pages [p_begin, p_end) and the epilogue.

        ``q_state`` / ``ph0`` (the persistent loop): the Q pipeline state to wait on and the parity of the
        ring's pass this tile starts on; None: the CTA's first and only tile.
        """
        f32 = cutlass.Float32
        (c, ctid, qk_mma, pv_mma, thr_qk, thr_pv, tSrQ, q_regs, tSrK, tOrV, tOrP, tPsP, tScS_mn, sh,
         frag_layout, pv_rs, tOgO, acc_O) = parts
        looping = ph0 is not None  # a tile of the persistent loop (trace time)
        if cutlass.const_expr(self.release_unread and (self.early_issue or self.early_release)):
            raise ValueError(f"{type(self).__name__}: release_unread cannot run with early_issue / early_release "
                             "(each would give page chunks back a second time in one pass); turn one off.")
        if cutlass.const_expr(self.wg1_free_unread_a and (self.early_issue or self.early_release)):
            raise ValueError(f"{type(self).__name__}: wg1_free_unread_a cannot run with early_issue / early_release "
                             "(WG1 would give page A's chunks back twice in one pass); turn one off.")
        if cutlass.const_expr((self.m0_first or self.wg1_free_unread_a)
                              and (self.wg1_softmax_first or self.wg1_provisional)):
            raise ValueError(f"{type(self).__name__}: m0_first / wg1_free_unread_a assume WG1's plain page-B path; "
                             "they cannot run with wg1_softmax_first or wg1_provisional (O_R would be rescaled twice, "
                             "or page A's chunk released twice); turn one off.")
        if cutlass.const_expr(self.wg0_pv_first and (self.vr_first or not self.own_p_rs)):
            raise ValueError(f"{type(self).__name__}: wg0_pv_first needs own_p_rs (P_A from registers) and no "
                             "vr_first (which makes P_A V_AL wait for WG1's issue); change one.")
        if cutlass.const_expr(looping):
            acc_O.fill(0.0)
        q_early = looping and self.loop_q_early  # (trace time) Q's buffer goes back after the last S GEMMs
        if cutlass.const_expr(q_early and (self.early_issue or self.q_reg_blocks > 0)):
            raise ValueError(f"{type(self).__name__}: loop_q_early gives Q's buffer back once each warpgroup has "
                             "waited for its last S GEMM and never copies Q to registers; it cannot run with "
                             "early_issue or q_reg_blocks (turn them off).")
        if cutlass.const_expr(q_early):
            tOgO = self._o_tile(thr_pv, mOp, bi, m_block, c)  # O leaves from registers: this tile's slice
        s_shape = thr_qk.partition_shape_C((BLOCK_M, PAGE))
        n_rows, m_run, row_sum, scale = self._row_state(acc_O, 1)  # m_run: the shared max as this WG knows it
        first_masked_pos = t - self.s + 1

        q_state = self._consumer_begin(q_pipe, mSem, ctid, c, q_state if looping else None)
        # page A of a pair sits in stage 0, page B in stage 1; a pair consumes the whole ring of
        # 2 * kv_chunks pipeline stages once, so pair k waits on phase k % 2 everywhere
        n_pairs = (n_iter + 1) // 2

        if c == 0:
            for k in cutlass.range(n_pairs, unroll=1):
                ph = self._pass_parity(k, ph0)
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                self._mark_pair(0, pa, p_end)
                self._ev(mSem, ctid, c, k, 0)
                acc_S = self._s_page(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, 0, ph, True, q_regs)
                self._ev(mSem, ctid, c, k, 1)  # S_A issued (its blocks landed)
                if cutlass.const_expr(self.early_issue):
                    # S_A went into the queue behind the previous pair's P_B V_BL: release page B
                    # when that one is done (a pair before the last always has a page B)
                    if k > 0:
                        warpgroup.wait_group(1)
                        self._release(kv_pipe, 1, 1 - ph)
                warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_A done
                if cutlass.const_expr(q_early):
                    if k == n_pairs - 1:
                        q_pipe.consumer_release(q_state)  # WG0's last read of Q: the next tile's Q may land
                if cutlass.const_expr(self.release_unread):
                    # page A's chunks outside WG0's O columns: only S_A read them.  (P_A is stored into page A's
                    # last chunk later; WG1 reads it there and releases after, so the slot cannot refill before)
                    self._release_blocks(kv_pipe, 0, ph, self._unread(0))
                self._page_softmax(acc_S, tScS_mn, pa, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale)
                self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
                if cutlass.const_expr(self.solo_softmax_probe):
                    cute.arch.barrier_arrive(barrier_id=BAR_SOLO, number_of_threads=CONSUMERS)
                self._publish_max(sh, 0, tScS_mn, m_run)
                if cutlass.const_expr(self.m0_first):
                    cute.arch.barrier_arrive(barrier_id=BAR_M0, number_of_threads=CONSUMERS)
                rPa = self._bf16(acc_S)
                if cutlass.const_expr(self.wg0_pv_first):
                    # P_A V_AL (P from registers) into the tensor pipe first, then P_A into shared memory for WG1
                    self._rescale(acc_O, scale)
                    self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPa, frag_layout), tOrV, 0, ph, 0)
                    self._ev(mSem, ctid, c, k, 4)  # P_A V_AL issued
                self._store_p(rPa, tPsP[None, None, None, 0], c)
                self._ev(mSem, ctid, c, k, 9)  # P stored and fenced
                cute.arch.barrier_arrive(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 3)  # P_A and m0 published
                if cutlass.const_expr(not self.wg0_pv_first):
                    self._rescale(acc_O, scale)
                    if cutlass.const_expr(self.vr_first):
                        # a wgmma issue waits while the other warpgroup's wgmmas run: let WG1 queue its
                        # P_A V_AR first, so page B's softmax behind it starts at once
                        cute.arch.barrier(barrier_id=BAR_VR, number_of_threads=CONSUMERS)
                    if cutlass.const_expr(self.own_p_rs):
                        self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPa, frag_layout), tOrV, 0, ph, 0)
                    else:
                        self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 0], tOrV, 0, ph, 0)
                    self._ev(mSem, ctid, c, k, 4)  # P_A V_AL issued
                if cutlass.const_expr(self.early_release or self.wg0_early_release):
                    # WG0 has nothing to do until P_B arrives: let page A's V_L blocks go as soon as
                    # P_A V_AL is done, not after the barrier (the next page A loads ~1,000 cycles sooner)
                    warpgroup.wait_group(0)
                    self._release_blocks(kv_pipe, 0, ph, self._wg0_kept())
                cute.arch.barrier(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 5)  # P_B and m1 arrived
                self._adopt_max(sh, 1, tScS_mn, scale_log2, m_run, row_sum, scale)
                if cutlass.const_expr(not (self.early_release or self.wg0_early_release)):
                    warpgroup.wait_group(0)  # P_A V_AL
                    self._release_blocks(kv_pipe, 0, ph, self._wg0_kept())
                self._ev(mSem, ctid, c, k, 6)  # P_A V_AL done
                self._rescale(acc_O, scale)
                if has_b:
                    self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 1], tOrV, 1, ph, 0)
                    if cutlass.const_expr(not self.early_issue):
                        # give page B's stage back at once: the next pair's page B is loaded into
                        # it and S_B waits for that load (the other WG's GEMMs keep the pipe busy)
                        warpgroup.wait_group(0)
                        self._release(kv_pipe, 1, ph)
                if cutlass.const_expr(looping):
                    self._stand_in_b(kv_pipe, ph, pa, p_end, False)
                self._ev(mSem, ctid, c, k, 7)  # P_B V_BL done
            if cutlass.const_expr(self.early_issue):
                # the last P_B V_BL; its page B is never released -- nothing is loaded after it
                warpgroup.wait_group(0)
        else:
            for k in cutlass.range(n_pairs, unroll=1):
                ph = self._pass_parity(k, ph0)
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                self._mark_pair(1, pa, p_end)
                self._ev(mSem, ctid, c, k, 0)
                acc_S = cute.make_rmem_tensor(s_shape, f32)
                if cutlass.const_expr(self.solo_softmax_probe):
                    # probe only: S_B waits until WG0's page-A softmax is done, so that runs beside no wgmma
                    cute.arch.barrier(barrier_id=BAR_SOLO, number_of_threads=CONSUMERS)
                if has_b:
                    acc_S.fill(0.0)
                    self._qk(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 1, ph, q_regs)
                else:
                    acc_S.fill(-cutlass.Float32.inf)  # no page B: scale 1, P 0
                self._ev(mSem, ctid, c, k, 1)  # S_B issued (its blocks landed)
                if cutlass.const_expr(not self.early_issue):
                    warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_B done
                if cutlass.const_expr(q_early):
                    if k == n_pairs - 1:
                        q_pipe.consumer_release(q_state)  # WG1's last read of Q
                if cutlass.const_expr(self.early_release):
                    # WG1 reads V_L blocks (0-3) of no page after its S: give page A's back at once
                    # and page B's now that S_B is done, so each refills after WG0's P V alone
                    self._release_blocks(kv_pipe, 0, ph, self._blocks(0))
                    if has_b:
                        self._release_blocks(kv_pipe, 1, ph, self._blocks(0))
                prov = None
                if cutlass.const_expr(self.wg1_provisional):
                    # while WG0 still runs page A's softmax (v30_cute)
                    prov = self._softmax_provisional(acc_S, tScS_mn, pa + 1, first_masked_pos, m_block, scale_log2,
                                                     m_run)
                    self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done (against its own max)
                if cutlass.const_expr(self.m0_first):
                    # m0 only: adopt it and rescale O_R while WG0 still converts and stores P_A
                    cute.arch.barrier(barrier_id=BAR_M0, number_of_threads=CONSUMERS)
                    self._adopt_max(sh, 0, tScS_mn, scale_log2, m_run, row_sum, scale)
                    self._rescale(acc_O, scale)
                cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 3)  # P_A and m0 arrived
                if cutlass.const_expr(self.wg1_free_unread_a):
                    # S0 also says WG0 gave back its previous pass of page A, so these arrivals count for this pass
                    self._release_blocks(kv_pipe, 0, ph, self._wg1_unread_a())
                if cutlass.const_expr(not self.m0_first):
                    self._adopt_max(sh, 0, tScS_mn, scale_log2, m_run, row_sum, scale)
                if cutlass.const_expr(self.wg1_softmax_first):
                    # v25_cute: page B's softmax before any P V is queued (_cute_seesaw_soft1)
                    self._wg1_softmax_first(kv_pipe, pv_rs, acc_S, acc_O, tPsP, tOrV, tScS_mn, frag_layout, sh, m_run,
                                            row_sum, scale, s_shape, pa, has_b, ph, first_masked_pos, m_block,
                                            scale_log2, mSem, ctid, c, k)
                else:
                    scale_b = scale  # O_R's factor before P_B V_BR
                    if cutlass.const_expr(self.wg1_publish_first):
                        # v31_cute: a wgmma issue stalls while WG0's P_A V_AL runs, so publish P_B first
                        scale_b = cute.make_rmem_tensor(cute.size(scale), f32)
                        rPb = self._publish_b_provisional(acc_S, tScS_mn, tPsP, sh, prov, has_b, scale_log2, m_run,
                                                          row_sum, scale_b, c, mSem, ctid, k)
                        self._ev(mSem, ctid, c, k, 5)  # P_B and m1 published
                    if cutlass.const_expr(not self.m0_first):
                        self._rescale(acc_O, scale)
                    self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 0], tOrV, 0, ph, 1)
                    self._ev(mSem, ctid, c, k, 4)  # P_A V_AR issued
                    if cutlass.const_expr(self.vr_first):
                        cute.arch.barrier_arrive(barrier_id=BAR_VR, number_of_threads=CONSUMERS)
                    if cutlass.const_expr(self.early_issue):
                        # P_A V_AR was queued behind S_B (O is no operand of S_B): wait for S_B only
                        warpgroup.wait_group(1)
                    if cutlass.const_expr(not self.wg1_publish_first):
                        if cutlass.const_expr(self.wg1_provisional):
                            rPb = self._publish_b_provisional(acc_S, tScS_mn, tPsP, sh, prov, has_b, scale_log2,
                                                              m_run, row_sum, scale, c, mSem, ctid, k)
                        else:
                            # WG1's softmax of page B runs while P_A V_AR executes
                            rPb = self._softmax_b(acc_S, tScS_mn, tPsP, sh, pa, has_b, first_masked_pos, m_block,
                                                  scale_log2, m_run, row_sum, scale, c, mSem, ctid, k)
                        self._ev(mSem, ctid, c, k, 5)  # P_B and m1 published
                    warpgroup.wait_group(0)  # P_A V_AR
                    if cutlass.const_expr(not self.wg1_release_a_after_vbr):
                        self._release_blocks(kv_pipe, 0, ph, self._wg1_rest(0))
                    self._ev(mSem, ctid, c, k, 6)  # P_A V_AR done
                    self._rescale(acc_O, scale_b)
                    if has_b:
                        if cutlass.const_expr(self.own_p_rs):
                            self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPb, frag_layout), tOrV, 1, ph, 1)
                        else:
                            self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 1], tOrV, 1, ph, 1)
                        if cutlass.const_expr(self.wg1_release_a_after_vbr):
                            self._release_blocks(kv_pipe, 0, ph, self._wg1_rest(0))  # beside P_B V_BR
                        warpgroup.wait_group(0)
                        self._release_blocks(kv_pipe, 1, ph, self._wg1_rest())
                    if cutlass.const_expr(self.wg1_release_a_after_vbr):
                        if not has_b:
                            self._release_blocks(kv_pipe, 0, ph, self._wg1_rest(0))
                if cutlass.const_expr(looping):
                    self._stand_in_b(kv_pipe, ph, pa, p_end, True)
                self._ev(mSem, ctid, c, k, 7)  # P_B V_BR done

        self._hdr(mSem, ctid, 4 + c)  # loop end
        if cutlass.const_expr(q_early):
            if n_pairs == 0:
                q_pipe.consumer_release(q_state)  # a tile without pages read no Q: give it back all the same
        total = self._pair_epilogue(acc_O, tOgO, tScS_mn, m_run, row_sum, sh, m_block, bi, split, c, ctid, mLp,
                                    scale_log2)
        if cutlass.const_expr(self.fused_combine and not self.direct):
            self._merge_splits(thr_pv, acc_O, tScS_mn, m_run, total, m_block, bi, split, c, ctid, sh,
                               mOp, mLp, mOut, mLse, mSem, scale_log2)
        if cutlass.const_expr(looping and not q_early):
            q_pipe.consumer_release(q_state)  # O's TMA store has read Q's buffer: the next Q may land
        self._hdr(mSem, ctid, 6 + c)  # epilogue (and pair merge) done
        if c == 0:
            self._hdr(mSem, ctid, 9, True)  # and at its end

    def _mark_pair(self, c: int, pa, p_end) -> None:
        """(trace time) Which warpgroup's pair loop is being traced, its pair's page A and the split's end, for
        calls inside it that need them (v51_cute's reloads).  A method, not an assignment in the loop: the DSL
        would carry ``self`` through the warpgroup branch."""
        self._rr_at = (c, pa, p_end)

    @cute.jit
    def _pair_epilogue(self, acc_O, tOgO, tScS_mn, m_run, row_sum, sh, m_block, bi, split, c, ctid, mLp, scale_log2):
        """Add the two warpgroups' row-sum halves (smem slots 2, 3), then MlaSplitSm90's store; returns the sums."""
        n_rows = cute.size(row_sum)
        for r in cutlass.range_constexpr(n_rows):
            sh[2 + c, tScS_mn[r, 0][0]] = _quad_reduce(row_sum[r], lambda x, y: x + y)
        cute.arch.barrier(barrier_id=BAR_SUM, number_of_threads=CONSUMERS)
        total = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        for r in cutlass.range_constexpr(n_rows):
            total[r] = sh[2, tScS_mn[r, 0][0]] + sh[3, tScS_mn[r, 0][0]]
        self._epilogue(acc_O, tOgO, tScS_mn, m_run, total, m_block, bi, split, c, ctid, mLp, scale_log2)
        return total

class MlaSplitSm90SeesawChunked(MlaSplitSm90Seesaw):
    """v9_cute: v8_cute with each page loaded as nine 64 x 64 TMA blocks, each with its own barrier.

    S of a page starts when its first block lands and follows the load block by block, so the
    load of page B -- which can start only when the previous pair has released its stage --
    overlaps S_B itself instead of stalling it.
    """

    kv_chunks = D_QK // 64


class MlaSplitSm90SeesawEarly(MlaSplitSm90SeesawChunked):
    """v11_cute: v9_cute with GEMMs queued before the previous one completes.

    WG0 issues S_A of the next pair right behind P_B V_BL (releasing page B once that finishes)
    instead of waiting for P_B V_BL first; WG1 queues P_A V_AR behind S_B instead of after it.
    """

    early_issue = True


class MlaSplitSm90SeesawPrefetch(MlaSplitSm90SeesawChunked):
    """v13_cute: v12_cute's split kernel whose row block 0 prefetches pages into L2 three pages ahead."""

    l2_prefetch_pages = 3


class MlaSplitSm90SeesawPrefetchPdl(MlaSplitSm90SeesawPrefetch):
    """v14_cute: v13_cute with the combine launched as a programmatic dependent of the split kernel."""

    pdl_trigger = True


class MlaSplitSm90SeesawOwnP(MlaSplitSm90SeesawChunked):
    """v18_cute: v12_cute's split kernel with each warpgroup's own P V as an rs-wgmma (P from registers)."""

    own_p_rs = True


class MlaSplitSm90SeesawOwnPEvict(MlaSplitSm90SeesawOwnP):
    """v19_cute: v18_cute with the L2 evict-first hint on every KV block load."""

    evict_first = True


class MlaSplitSm90SeesawQRegs(MlaSplitSm90SeesawOwnPEvict):
    """v20_cute: v19_cute with Q's first two 64-dim blocks in registers (rs-wgmma for 8 of S's 36 k-steps)."""

    q_reg_blocks = 2


class MlaSplitSm90SeesawMulticast(MlaSplitSm90SeesawOwnPEvict):
    """v21_cute: v19_cute with the two row blocks of a (sequence, split) in one cluster, each KV block multicast."""

    cluster_rows = 2
