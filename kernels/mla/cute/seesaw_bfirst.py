"""v44_cute: the seesaw pair with warpgroup 1's page-B chain first, on the max alone.

Run 15's timeline probe of v35_cute (docs/kernels/mla.md) put the pair's length on WG1's chain: S_B done
-> barrier S0 (m0 *and* P_A, so it waits for WG0's P store) -> adopt m0, rescale O_R, issue P_A V_AR (its
issue waits behind WG0's P_A V_AL) -> page B's softmax -> P_B published, ~1,880 of ~6,070 cycles, with only
~1,020 cycles of tensor work (P_A V_AL, P_A V_AR) in that window: two idle gaps of ~410 and ~440.  Here the order is the one FlashMLA's sm90 kernel uses (read, not copied):

* WG0: S_A; softmax against the shared max (m0, P_A, e(m - m0)); publish m0 alone (barrier M0); rescale
  O_L and issue P_A V_AL from registers; wait for m1 and P_B (barrier S1); adopt m1 (f = e(m0 - m1));
  scale the fp32 P_A by f, store it in bf16 into page A's RoPE block and arrive on S0; when P_A V_AL is
  done, give page A back, rescale O_L by f and issue P_B V_BL (P_B from shared memory).
* WG1: S_B; wait M0; adopt m0 and run page B's softmax against it (m1, P_B, e(m0 - m1)); publish m1
  and P_B (barrier S1); bring O_R to m1 in one rescale (e(m - m0) e(m0 - m1)) and issue P_B V_BR from
  registers; wait S0 and issue P_A V_AR (P_A already at m1, from shared memory).

So page B's softmax no longer waits for P_A's store, O_R's rescale or a wgmma issue, and O_R is
rescaled once per pair instead of twice.  The algebra is ``_stagger``'s (tests/test_seesaw_algebra.py:
WG0 multiplies P_A here, WG1 did there; the sum is the same).  P_A is rounded to bf16 once for V_AL at m0
and once, scaled, for V_AR at m1 (each within 2^-9 of the fp32 value, as every P).

The slots and barriers stay one-deep: WG0 writes m0 of pair k+1 only after S1(k), which WG1 arrives on
after reading m0 of pair k; WG1 writes m1 of pair k+1 only after S0(k), which WG0 arrives on after
reading m1 of pair k; each named barrier has one arrival and one wait per pair in that order.  Page A's
RoPE block takes P_A after WG0 gave the page back: the stage refills only after WG1's release too, which
comes after its P_A V_AR has read P_A (WG0 stores P_A before it releases page A anyway).  Only the
one-tile schedule (no persistent loop) with P from registers, and none of the earlier variants' flags but
``wg1_free_unread_a`` (v45_cute): page A is now freed last (WG1's P_A V_AR is its last GEMM), and the
producer loads page A's chunks before page B's, so WG1 gives back page A's chunk it never reads at M0
(which tells it that both warpgroups released the previous pass).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.seesaw_ops import BAR_M0, BAR_S0, BAR_S1, BAR_VR
from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, CONSUMERS, PAGE, _mn_view

__all__ = ["MlaSplitSm90SeesawPairBFirst", "MlaSplitSm90SeesawPairBFirstFreeA", "MlaSplitSm90SeesawPairBFirstM1",
           "MlaSplitSm90SeesawPairBFirstPb", "MlaSplitSm90SeesawPairBFirstPb9"]


class MlaSplitSm90SeesawPairBFirst(MlaSplitSm90SeesawPairC3Early):
    """v44_cute: v35_cute's kernel with WG1's page-B softmax on m0 alone and P_A scaled to m1 by WG0."""

    #: WG1 publishes m1 (barrier S1) before it stores P_B, and WG0 queues P_B V_BL only once WG1 has stored
    #: P_B and issued P_A V_AR (barrier BAR_VR): the pipe then runs P_A V_AL, P_B V_BR, P_A V_AR, P_B V_BL,
    #: FlashMLA's order (v48_cute)
    m1_first = False
    #: the probe's names for the events this schedule moved (``_cute_trace.analyse``): P_A is published at m1
    trace_events = {3: ("P_A (at m1) published", "P_A (at m1) arrived")}
    #: with m1_first: P_B lives in the CTA's own 8 KB P tile (``_cute_sm90``'s sP), not in page B's RoPE block,
    #: so page B's chunks that P_B V_BL does not read come free after P_B V_BR (WG0 gives them back at S1);
    #: set ``page_b_order`` to load (and read in S_B) those first (v49_cute)
    p_b_buffer = False

    def _check_flags(self) -> None:
        if not self.own_p_rs:
            raise ValueError(f"{type(self).__name__}: the B-first pair needs own_p_rs (each warpgroup's own P "
                             "from registers); set it, or use the base seesaw schedule.")
        self._refuse_flags("the B-first pair", {
            "early_issue": self.early_issue, "early_release": self.early_release,
            "release_unread": self.release_unread, "wg1_provisional": self.wg1_provisional,
            "wg1_publish_first": self.wg1_publish_first, "wg1_softmax_first": self.wg1_softmax_first,
            "vr_first": self.vr_first, "solo_softmax_probe": self.solo_softmax_probe, "m0_first": self.m0_first,
            "wg0_pv_first": self.wg0_pv_first, "fused_combine": self.fused_combine,
            "q_reg_blocks": self.q_reg_blocks}, "use the base seesaw schedule for those.")

    @cute.jit
    def _seesaw_tile(self, parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mOp, mLp, mOut,
                     mLse, mSem, scale_log2, q_state=None, ph0=None):
        """One tile, pages [p_begin, p_end) in pairs (module docstring), then the epilogue.  Probe events keep
        their labels: WG0 e3 is P_A (at m1) published, WG1 e3 P_A arrived, e4 P_A V_AR issued (after P_B V_BR)."""
        (c, ctid, qk_mma, pv_mma, thr_qk, thr_pv, tSrQ, q_regs, tSrK, tOrV, tOrP, tPsP, tScS_mn, sh,
         frag_layout, pv_rs, tOgO, acc_O) = parts
        if cutlass.const_expr(ph0 is not None):
            raise ValueError(f"{type(self).__name__}: no persistent loop for the B-first pair; set persistent off.")
        self._check_flags()
        tOrPb, tPsPb = None, None  # P_B's tile in the CTA's P buffer (p_b_buffer), as P V operand and store target
        if cutlass.const_expr(self.p_b_buffer):
            if cutlass.const_expr(not self.m1_first):
                raise ValueError(f"{type(self).__name__}: p_b_buffer needs m1_first (P_B is stored after m1 is "
                                 "published, and read only after barrier 9); set it.")
            tOrPb = pv_mma.make_fragment_A(thr_pv.partition_A(self._sP))  # (MMA, 1, 4)
            tPsPb = thr_qk.partition_C(self._sP)
        s_shape = thr_qk.partition_shape_C((BLOCK_M, PAGE))
        n_rows, m_run, row_sum, scale, scale2 = self._row_state(acc_O, 2)
        first_masked_pos = t - self.s + 1

        self._consumer_begin(q_pipe, mSem, ctid, c)
        n_pairs = (n_iter + 1) // 2

        if c == 0:
            for k in cutlass.range(n_pairs, unroll=1):
                ph = self._pass_parity(k)
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                self._ev(mSem, ctid, c, k, 0)
                acc_S = self._s_page(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, 0, ph, True, q_regs)
                self._ev(mSem, ctid, c, k, 1)  # S_A issued
                warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_A done
                self._page_softmax(acc_S, tScS_mn, pa, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale)
                self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
                self._publish_max(sh, 0, tScS_mn, m_run)
                cute.arch.barrier_arrive(barrier_id=BAR_M0, number_of_threads=CONSUMERS)
                rPa = self._bf16(acc_S)
                self._rescale(acc_O, scale)
                self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPa, frag_layout), tOrV, 0, ph, 0)
                self._ev(mSem, ctid, c, k, 4)  # P_A V_AL issued
                cute.arch.barrier(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 5)  # m1 and P_B arrived
                if cutlass.const_expr(self.p_b_buffer):
                    if has_b:
                        # page B's chunks outside V_L: P_B V_BL does not read them (P_B is in the P tile), and
                        # S1 says S_B, their other reader, is done; waiting on them first ties the release to
                        # this pass's load
                        self._wait_blocks(kv_pipe, 1, ph, self._unread(0))
                        self._release_blocks(kv_pipe, 1, ph, self._unread(0))
                self._adopt_max(sh, 1, tScS_mn, scale_log2, m_run, row_sum, scale)
                # P_A at m1 for WG1's P_A V_AR (the fp32 P_A; P_A V_AL reads rPa, not these registers)
                acc_S_mn = _mn_view(acc_S)
                for r in cutlass.range_constexpr(n_rows):
                    acc_S_mn[r, None] = acc_S_mn[r, None].load() * scale[r]
                self._store_p(self._bf16(acc_S), tPsP[None, None, None, 0], c)
                self._ev(mSem, ctid, c, k, 9)  # P_A stored and fenced
                cute.arch.barrier_arrive(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 3)  # P_A (at m1) published
                warpgroup.wait_group(0)  # P_A V_AL
                self._release(kv_pipe, 0, ph)
                self._ev(mSem, ctid, c, k, 6)  # P_A V_AL done
                self._rescale(acc_O, scale)
                if cutlass.const_expr(self.m1_first):
                    # P_B is in shared memory and P_A V_AR is queued: P_B V_BL goes in behind it, so page A
                    # (read last by P_A V_AR) comes back before page B
                    cute.arch.barrier(barrier_id=BAR_VR, number_of_threads=CONSUMERS)
                if has_b:
                    if cutlass.const_expr(self.p_b_buffer):
                        self._pv(kv_pipe, pv_mma, acc_O, tOrPb, tOrV, 1, ph, 0)
                        warpgroup.wait_group(0)
                        self._release_blocks(kv_pipe, 1, ph, self._blocks(0))
                    else:
                        self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 1], tOrV, 1, ph, 0)
                        warpgroup.wait_group(0)
                        self._release(kv_pipe, 1, ph)
                self._ev(mSem, ctid, c, k, 7)  # P_B V_BL done
        else:
            for k in cutlass.range(n_pairs, unroll=1):
                ph = self._pass_parity(k)
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                self._ev(mSem, ctid, c, k, 0)
                # no page B: S all -inf, so m1 = m0 and P_B 0
                acc_S = self._s_page(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, 1, ph, has_b, q_regs)
                self._ev(mSem, ctid, c, k, 1)  # S_B issued
                warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_B done
                cute.arch.barrier(barrier_id=BAR_M0, number_of_threads=CONSUMERS)
                if cutlass.const_expr(self.wg1_free_unread_a):
                    self._release_blocks(kv_pipe, 0, ph, self._wg1_unread_a())
                self._adopt_max(sh, 0, tScS_mn, scale_log2, m_run, row_sum, scale)  # e(m - m0)
                self._page_softmax(acc_S, tScS_mn, pa + 1, first_masked_pos, m_block, scale_log2, m_run, row_sum,
                                   scale2)  # e(m0 - m1)
                self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
                if cutlass.const_expr(self.m1_first):
                    # m1 first (WG0 scales and stores P_A on it), then P_B, read by WG0's P_B V_BL after BAR_VR
                    self._publish_max(sh, 1, tScS_mn, m_run)
                    cute.arch.barrier_arrive(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                    self._ev(mSem, ctid, c, k, 5)  # m1 published
                    rPb = self._bf16(acc_S)
                    if has_b:
                        self._store_p(rPb, tPsPb if cutlass.const_expr(self.p_b_buffer) else tPsP[None, None, None, 1],
                                      c)
                    self._ev(mSem, ctid, c, k, 9)  # P_B stored and fenced
                else:
                    rPb = self._publish_b(acc_S, tScS_mn, tPsP, sh, has_b, m_run, c, mSem, ctid, k)  # m1, P_B; S1
                    self._ev(mSem, ctid, c, k, 5)  # P_B and m1 published
                for r in cutlass.range_constexpr(n_rows):
                    scale[r] = scale[r] * scale2[r]
                self._rescale(acc_O, scale)  # O_R to m1, once
                if has_b:
                    self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPb, frag_layout), tOrV, 1, ph, 1)
                cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 3)  # P_A (at m1) arrived
                self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 0], tOrV, 0, ph, 1)
                self._ev(mSem, ctid, c, k, 4)  # P_A V_AR issued
                if cutlass.const_expr(self.m1_first):
                    cute.arch.barrier_arrive(barrier_id=BAR_VR, number_of_threads=CONSUMERS)  # P_B stored too
                warpgroup.wait_group(1)  # P_B V_BR (a no-op without page B: only P_A V_AR is in flight)
                if has_b:
                    self._release(kv_pipe, 1, ph)
                warpgroup.wait_group(0)  # P_A V_AR
                self._release_blocks(kv_pipe, 0, ph, self._wg1_rest(0))
                self._ev(mSem, ctid, c, k, 6)  # P_A V_AR done
                self._ev(mSem, ctid, c, k, 7)  # (P_B V_BR done before it)

        self._hdr(mSem, ctid, 4 + c)  # loop end
        self._pair_epilogue(acc_O, tOgO, tScS_mn, m_run, row_sum, sh, m_block, bi, split, c, ctid, mLp, scale_log2)
        self._hdr(mSem, ctid, 6 + c)  # epilogue done
        if c == 0:
            self._hdr(mSem, ctid, 9, True)


class MlaSplitSm90SeesawPairBFirstFreeA(MlaSplitSm90SeesawPairBFirst):
    """v45_cute: v44_cute with WG1 giving back page A's unread chunk at barrier M0 (``wg1_free_unread_a``)."""

    wg1_free_unread_a = True


class MlaSplitSm90SeesawPairBFirstM1(MlaSplitSm90SeesawPairBFirstFreeA):
    """v48_cute: v45_cute with m1 published before P_B is stored and P_B V_BL queued behind P_A V_AR
    (``m1_first``)."""

    m1_first = True
    trace_events = {3: ("P_A (at m1) published", "P_A (at m1) arrived"), 5: ("m1 arrived", "m1 published")}


class MlaSplitSm90SeesawPairBFirstPb(MlaSplitSm90SeesawPairBFirstM1):
    """v49_cute: v48_cute with P_B in the CTA's own P tile (``p_b_buffer``) and page B's third chunk (V_R and the
    RoPE dims, free once P_B V_BR is done) loaded and read first (``page_b_order``)."""

    p_b_buffer = True
    page_b_order = (2, 0, 1)  # (kv_chunks = 3) the chunks outside V_L first, then V_L's
    # the producer's order within a pair, by when each slot comes free: after P_A V_AL, P_B V_BR, P_A V_AR, P_B V_BL
    pair_load_order = ((0, 0), (1, 2), (0, 1), (0, 2), (1, 0), (1, 1))


class MlaSplitSm90SeesawPairBFirstPb9(MlaSplitSm90SeesawPairBFirstPb):
    """v50_cute: v49_cute with each page loaded as nine 64-dim chunks (``kv_chunks = 9``), aligned to the O halves
    as FlashMLA's are: V_L = 0-3 (back after P_A V_AL / P_B V_BL), V_R = 4-7, RoPE = 8."""

    kv_chunks = 9
    page_b_order = (4, 5, 6, 7, 8, 0, 1, 2, 3)  # page B: V_R and RoPE (free after P_B V_BR) first, then V_L
    pair_load_order = (tuple((0, j) for j in range(4)) + tuple((1, j) for j in range(4, 9))
                       + tuple((0, j) for j in range(4, 9)) + tuple((1, j) for j in range(4)))
