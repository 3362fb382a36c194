"""The stale-max seesaw (devlog run 21, "Next"): v35_cute's pair with no max passed inside a pair.

In the seesaw (``_cute_seesaw``) page B's softmax needs m0, the max after page A, so WG1's softmax waits for
WG0's, and each warpgroup rescales its O half twice per pair (to m0, then to m1).  Here both warpgroups take
pair k's P against ``m_k``, the max of every page *before* the pair:

* WG0: S_A; rescale O_L to m_k (the factor from pair k-1) while S_A runs; ``P_A = e(S_A - m_k)`` (may exceed 1);
  publish ``rowmax S_A`` and P_A (barrier S0); ``O_L += P_A V_AL``; wait for WG1's ``rowmax S_B`` and P_B
  (barrier S1); ``O_L += P_B V_BL``.
* WG1: S_B; rescale O_R while it runs; ``P_B = e(S_B - m_k)`` at once (no wait for WG0); store P_B, wait S0,
  publish (S1); ``O_R += P_A V_AR + P_B V_BR``.
* Both: ``m_{k+1} = max(m_k, rowmax S_A, rowmax S_B)``, the factor ``e(m_k - m_{k+1})`` applied to the row sums
  at once and to O at the next pair's S (once more after the last pair).

Pair 0 has no earlier page: ``m_0 = rowmax S_A`` of the first page, which WG1 waits for (barrier S0) before its
softmax, as every pair of the seesaw does.  A row that has seen no key takes 0 as its reference (``e`` stays
finite; its P is 0 where S is -inf).  The row maxima cross through shared-memory slots double-buffered by pair
parity (slots 4 + k % 2 for page A's, 6 + k % 2 for page B's; 2 and 3 stay the epilogue's row sums), so a
warpgroup one pair ahead never overwrites a maximum the other has not read.

Exact unless a max rises by more than ~120 (log2 units) inside a pair: P's bf16 shares fp32's exponent, so
only such a rise overflows (or, with the reference 0, a row whose first scores are below ~-126 underflows).
The numpy model (tests/test_seesaw_algebra.py::test_stale_max_*) shows every such row ends with a row sum < 0.5
or not finite; **this kind has no fallback for them yet** (a version would re-run those tiles with v35_cute's
kernel), so it is a probe kind: no version names it.  On the trial inputs (normal scores) it is exact.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla._cute_seesaw_ops import BAR_S0, BAR_S1
from kforge_kernels.mla._cute_seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla._cute_sm90_parts import BLOCK_M, CONSUMERS, PAGE, _masked_row_max, _mn_view

#: shared-memory row slots (of ``sRed``'s 8 x 64 floats) for page A's / page B's row maxima, two each (parity)
SLOT_MAX_A, SLOT_MAX_B = 4, 6


class MlaSplitSm90SeesawPairStale(MlaSplitSm90SeesawPairC3Early):
    """v35_cute's kernel with the stale-max pair (module docstring); a probe kind, not a version."""

    @cute.jit
    def _seesaw_tile(self, parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mOp, mLp, mOut,
                     mLse, mSem, scale_log2, q_state=None, ph0=None):
        """One tile: the stale-max pair loop over pages [p_begin, p_end), then the seesaw's epilogue."""
        (c, ctid, qk_mma, pv_mma, thr_qk, thr_pv, tSrQ, q_regs, tSrK, tOrV, tOrP, tPsP, tScS_mn, sh4,
         frag_layout, pv_rs, tOgO, acc_O) = parts
        self._refuse_flags("the stale-max pair", {
            "a persistent loop": ph0 is not None, "early_issue": self.early_issue, "early_release": self.early_release,
            "release_unread": self.release_unread, "wg1_free_unread_a": self.wg1_free_unread_a,
            "m0_first": self.m0_first, "wg0_pv_first": self.wg0_pv_first, "vr_first": self.vr_first,
            "wg1_softmax_first": self.wg1_softmax_first, "wg1_provisional": self.wg1_provisional,
            "solo_softmax_probe": self.solo_softmax_probe, "q_reg_blocks": self.q_reg_blocks > 0,
            "fused_combine": self.fused_combine, "wg1_release_a_after_vbr": self.wg1_release_a_after_vbr,
            "no own_p_rs": not self.own_p_rs, "softmax_ilp": self.softmax_ilp,
        }, "use v35_cute's flags (sm90_seesaw_pair_c3early) under it")
        # the seesaw's 4 slots plus the maxima's 4 (sRed holds 512 floats)
        sh = cute.make_tensor(sh4.iterator, cute.make_layout((8, BLOCK_M), stride=(BLOCK_M, 1)))
        s_shape = thr_qk.partition_shape_C((BLOCK_M, PAGE))
        # m_run: m_k, the max of the pages before the pair; rm_own, factor: this pair's
        n_rows, m_run, row_sum, rm_own, factor = self._row_state(acc_O, 2)
        factor.fill(1.0)
        first_masked_pos = t - self.s + 1

        self._consumer_begin(q_pipe, mSem, ctid, c)
        n_pairs = (n_iter + 1) // 2

        if c == 0:
            for k in cutlass.range(n_pairs, unroll=1):
                ph = k % 2
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                self._ev(mSem, ctid, c, k, 0)
                acc_S = self._s_page(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, 0, ph, True, q_regs)
                self._ev(mSem, ctid, c, k, 1)  # S_A issued
                self._rescale(acc_O, factor)  # to m_k, beside S_A (pair k-1's P V are done)
                warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_A done
                self._stale_softmax(acc_S, tScS_mn, pa, first_masked_pos, m_block, scale_log2, m_run, rm_own,
                                    row_sum, k)
                self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
                self._publish_max(sh, SLOT_MAX_A + k % 2, tScS_mn, rm_own)
                rPa = self._bf16(acc_S)
                self._store_p(rPa, tPsP[None, None, None, 0], c)
                self._ev(mSem, ctid, c, k, 9)  # P stored and fenced
                cute.arch.barrier_arrive(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 3)  # P_A and rowmax S_A published
                self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPa, frag_layout), tOrV, 0, ph, 0)
                self._ev(mSem, ctid, c, k, 4)  # P_A V_AL issued
                warpgroup.wait_group(0)
                self._release_blocks(kv_pipe, 0, ph, self._wg0_kept())  # page A, as v35_cute's WG0 does
                self._ev(mSem, ctid, c, k, 6)  # P_A V_AL done
                cute.arch.barrier(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 5)  # P_B and rowmax S_B arrived
                self._next_max(sh, SLOT_MAX_B + k % 2, tScS_mn, scale_log2, m_run, rm_own, row_sum, factor)
                if has_b:
                    self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 1], tOrV, 1, ph, 0)
                    warpgroup.wait_group(0)
                    self._release(kv_pipe, 1, ph)
                self._ev(mSem, ctid, c, k, 7)  # P_B V_BL done
        else:
            for k in cutlass.range(n_pairs, unroll=1):
                ph = k % 2
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                self._ev(mSem, ctid, c, k, 0)
                # no page B: S all -inf, so P 0 and rowmax -inf
                acc_S = self._s_page(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, 1, ph, has_b, q_regs)
                self._ev(mSem, ctid, c, k, 1)  # S_B issued
                self._rescale(acc_O, factor)
                warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_B done
                if k == 0:
                    # pair 0 has no earlier max: take page A's (WG0 published it with P_A)
                    cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                    self._take_max(sh, SLOT_MAX_A, tScS_mn, m_run)
                self._stale_softmax(acc_S, tScS_mn, pa + 1, first_masked_pos, m_block, scale_log2, m_run, rm_own,
                                    row_sum, 1)
                self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
                self._publish_max(sh, SLOT_MAX_B + k % 2, tScS_mn, rm_own)
                rPb = self._bf16(acc_S)
                if has_b:
                    self._store_p(rPb, tPsP[None, None, None, 1], c)
                self._ev(mSem, ctid, c, k, 9)  # P stored and fenced
                if k > 0:
                    cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 3)  # P_A and rowmax S_A arrived
                # page A's max, read before the S1 arrival: WG0 writes its next one only after S1, so this read
                # comes first (page B's slot is the one that needs the parity: WG1 writes it with no barrier between)
                self._next_max(sh, SLOT_MAX_A + k % 2, tScS_mn, scale_log2, m_run, rm_own, row_sum, factor)
                cute.arch.barrier_arrive(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                self._ev(mSem, ctid, c, k, 5)  # P_B and rowmax S_B published
                self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 0], tOrV, 0, ph, 1)
                self._ev(mSem, ctid, c, k, 4)  # P_A V_AR issued
                if has_b:
                    self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPb, frag_layout), tOrV, 1, ph, 1)
                    warpgroup.wait_group(1)
                    self._release_blocks(kv_pipe, 0, ph, self._wg1_rest(0))
                    self._ev(mSem, ctid, c, k, 6)  # P_A V_AR done
                    warpgroup.wait_group(0)
                    self._release_blocks(kv_pipe, 1, ph, self._wg1_rest())
                else:
                    warpgroup.wait_group(0)
                    self._release_blocks(kv_pipe, 0, ph, self._wg1_rest(0))
                    self._ev(mSem, ctid, c, k, 6)
                self._ev(mSem, ctid, c, k, 7)  # P_B V_BR done

        self._rescale(acc_O, factor)  # the last pair's factor: O relative to the tile's max, as the epilogue wants
        self._hdr(mSem, ctid, 4 + c)  # loop end
        self._pair_epilogue(acc_O, tOgO, tScS_mn, m_run, row_sum, sh4, m_block, bi, split, c, ctid, mLp, scale_log2)
        self._hdr(mSem, ctid, 6 + c)  # epilogue (and pair merge) done
        if c == 0:
            self._hdr(mSem, ctid, 9, True)

    @cute.jit
    def _stale_softmax(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run, rm_own, row_sum, k):
        """Mask page p, ``rm_own`` = its row maxima, S -> P = e(S - m) against the stale max ``m_run`` (for k == 0:
        page A's own maxima, which WG0 then holds as m_0), the row sums raised by P's (no factor: the reference
        does not move inside a pair).  A row with no key yet takes 0 as its reference."""
        acc_S_mn = _mn_view(acc_S)
        need_mask = p * PAGE + PAGE > first_masked_pos
        for r in cutlass.range_constexpr(cute.size(m_run)):
            rm_own[r] = _masked_row_max(acc_S_mn, tScS_mn, r, need_mask, p, first_masked_pos, m_block, self.h)
            if k == 0:
                m_run[r] = rm_own[r]  # WG0's pair 0 (WG1 passes k = 1: it took m_0 from WG0)
            ref = 0.0 if m_run[r] == -cutlass.Float32.inf else m_run[r]
            probs = cute.math.exp2(acc_S_mn[r, None].load() * scale_log2 - ref * scale_log2, fastmath=True)
            row_sum[r] = row_sum[r] + probs.reduce(cute.ReductionOp.ADD, cutlass.Float32.zero, 0)
            acc_S_mn[r, None] = probs

    @cute.jit
    def _take_max(self, sh, slot, tScS_mn, m_run):
        """``m_run`` = the other warpgroup's published maxima in smem row ``slot`` (pair 0's m_0)."""
        for r in cutlass.range_constexpr(cute.size(m_run)):
            m_run[r] = sh[slot, tScS_mn[r, 0][0]]

    @cute.jit
    def _next_max(self, sh, slot, tScS_mn, scale_log2, m_run, rm_own, row_sum, factor):
        """m_{k+1} = max(m_k, own rowmax, the other warpgroup's (smem row ``slot``)); ``factor`` = e(m_k - m_{k+1})
        against the references actually used (0 for a row with no key yet); row sums rescaled now, O later."""
        for r in cutlass.range_constexpr(cute.size(m_run)):
            m_next = cute.arch.fmax(m_run[r], cute.arch.fmax(rm_own[r], sh[slot, tScS_mn[r, 0][0]]))
            ref_old = 0.0 if m_run[r] == -cutlass.Float32.inf else m_run[r]
            ref_new = 0.0 if m_next == -cutlass.Float32.inf else m_next
            factor[r] = cute.math.exp2(ref_old * scale_log2 - ref_new * scale_log2, fastmath=True)
            row_sum[r] = row_sum[r] * factor[r]
            m_run[r] = m_next
