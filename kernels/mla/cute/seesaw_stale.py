"""v57_cute: the stale-max seesaw (devlog runs 21-22): v35_cute's pair with no max passed inside a pair.

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
or not finite; the probe kinds have no fallback for them; v57_cute's kind poisons them (NaN lse) for a redo
launch of v35_cute's exact kernel, and v58_cute's persistent kind (``_cute_persistent``) redoes them in the
same kernel (``exact_pass``).  On the trial inputs (normal scores) it is exact.

In the persistent loop (``ph0`` given) the ring's pass parity, and with it the maxima's slot parity, runs on
across tiles; O starts from zero in every tile, and a tile with an odd page count passes the producer's
stand-in page B through the ring, as v46_cute's loop does.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.seesaw_ops import BAR_S0, BAR_S1
from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, CONSUMERS, PAGE, _masked_row_max, _mn_view

#: shared-memory row slots (of ``sRed``'s 8 x 64 floats) for page A's / page B's row maxima, two each (parity)
SLOT_MAX_A, SLOT_MAX_B = 4, 6
#: (v57_cute) a row whose max rises by more than this (log2 units) inside a pair is poisoned for the exact redo:
#: well below the ~126 at which P's factor becomes subnormal and 128 at which P overflows
RISE_LIMIT = 100.0


class MlaSplitSm90SeesawPairStale(MlaSplitSm90SeesawPairC3Early):
    """v35_cute's kernel with the stale-max pair (module docstring); a probe kind, not a version."""

    #: WG1 issues P_A V_AR before page B's softmax (``MlaSplitSm90SeesawPairStaleVr``)
    stale_vr_first = False
    #: poison (NaN lse) every row the stale max may have got wrong, for a redo launch to recompute (v57_cute)
    redo_fallback = False
    #: (trace time) the tiles being traced run v35_cute's exact pair: v58_cute's in-kernel redo loop sets it
    #: around its second loop (``_exact``), so one kernel holds both pair loops
    exact_pass = False

    def _exact(self, on: bool) -> None:
        """(trace time) Switch the exact pass on or off.  A method, not an assignment in a jit function: the DSL
        would carry ``self`` through the branch around it."""
        self.exact_pass = on

    @cute.jit
    def _flag_rows(self, acc_O, row_sum, n_rows):
        """Make this thread's row sum NaN where its part of the O row is not finite (P overflowed into P V while
        the row sum did not); the sums then carry it through both warpgroups' totals to the row's lse."""
        acc_O_mn = _mn_view(acc_O)
        for r in cutlass.range_constexpr(n_rows):
            # a sum over the row part is inf / NaN when any element is (or when finite ones overflow: harmless)
            part = acc_O_mn[r, None].load().reduce(cute.ReductionOp.ADD, cutlass.Float32.zero, 0)
            if part != part:
                row_sum[r] = cutlass.Float32.nan
            if cute.arch.fmax(part, -part) == cutlass.Float32.inf:
                row_sum[r] = cutlass.Float32.nan

    @cute.jit
    def _epilogue(self, acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp, scale_log2):
        """The seesaw's epilogue, after poisoning the rows the stale max may have got wrong (``redo_fallback``):
        a row with a key sums to >= 1 against its final max (the max itself scores e^0) and one with none to 0,
        so a total < 0.5 beside a finite max, or a total that is not finite, marks an overflow or underflow
        inside a pair (tests/test_seesaw_algebra.py::test_stale_max_*; a rise past ``RISE_LIMIT`` was already
        made NaN by ``_next_max``); its lse becomes NaN, which the pair merge and the direct store carry to the
        output lse the guarded redo reads (one split: the tile's flag, set after the epilogue, too)."""
        if cutlass.const_expr(self.redo_fallback and not self.exact_pass):
            for r in cutlass.range_constexpr(cute.size(total)):
                tr = total[r]
                if tr < 0.5:
                    if row_max[r] != -cutlass.Float32.inf:
                        total[r] = cutlass.Float32.nan
                if tr == cutlass.Float32.inf:
                    total[r] = cutlass.Float32.nan
        MlaSplitSm90SeesawPairC3Early._epilogue(self, acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c,
                                                ctid, mLp, scale_log2)

    @cute.jit
    def _seesaw_tile(self, parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mOp, mLp, mOut,
                     mLse, mSem, scale_log2, q_state=None, ph0=None):
        """One tile: the stale-max pair loop over pages [p_begin, p_end), then the seesaw's epilogue (in the exact
        pass: v35_cute's tile)."""
        if cutlass.const_expr(self.exact_pass):
            MlaSplitSm90SeesawPairC3Early._seesaw_tile(self, parts, m_block, bi, split, t, p_begin, p_end, n_iter,
                                                       q_pipe, kv_pipe, mOp, mLp, mOut, mLse, mSem, scale_log2,
                                                       q_state=q_state, ph0=ph0)
        else:
            self._stale_tile(parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mLp, mSem,
                             scale_log2, q_state, ph0)

    @cute.jit
    def _stale_tile(self, parts, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe, mLp, mSem,
                    scale_log2, q_state, ph0):
        """The stale-max tile (``_seesaw_tile``)."""
        (c, ctid, qk_mma, pv_mma, thr_qk, thr_pv, tSrQ, q_regs, tSrK, tOrV, tOrP, tPsP, tScS_mn, sh4,
         frag_layout, pv_rs, tOgO, acc_O) = parts
        self._refuse_flags("the stale-max pair", {
            "loop_q_early": self.loop_q_early,
            "a persistent loop without stale_vr_first": ph0 is not None and not self.stale_vr_first,
            "early_issue": self.early_issue, "early_release": self.early_release,
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
        looping = ph0 is not None  # a tile of the persistent loop (trace time)
        if cutlass.const_expr(looping):
            acc_O.fill(0.0)
        n_rows, m_run, row_sum, rm_own, factor = self._row_state(acc_O, 2)
        factor.fill(1.0)
        first_masked_pos = t - self.s + 1

        q_state = self._consumer_begin(q_pipe, mSem, ctid, c, q_state if looping else None)
        n_pairs = (n_iter + 1) // 2

        if c == 0:
            for k in cutlass.range(n_pairs, unroll=1):
                ph, pa, has_b, acc_S = self._pair_begin(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, q_regs, acc_O, factor, k,
                                                        0, p_begin, p_end, mSem, ctid, c, ph0)
                par = self._slot_parity(k, ph, ph0)
                warpgroup.wait_group(0)
                self._ev(mSem, ctid, c, k, 2)  # S_A done
                self._stale_softmax(acc_S, tScS_mn, pa, first_masked_pos, m_block, scale_log2, m_run, rm_own,
                                    row_sum, k)
                self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
                self._publish_max(sh, SLOT_MAX_A + par, tScS_mn, rm_own)
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
                self._next_max(sh, SLOT_MAX_B + par, tScS_mn, scale_log2, m_run, rm_own, row_sum, factor)
                if has_b:
                    self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 1], tOrV, 1, ph, 0)
                    warpgroup.wait_group(0)
                    self._release(kv_pipe, 1, ph)
                if cutlass.const_expr(looping):
                    self._stand_in_b(kv_pipe, ph, pa, p_end, False)
                self._ev(mSem, ctid, c, k, 7)  # P_B V_BL done
        else:
            if cutlass.const_expr(self.stale_vr_first):
                self._wg1_vr_first(kv_pipe, qk_mma, pv_mma, pv_rs, s_shape, tSrQ, tSrK, q_regs, tOrP, tOrV, tPsP,
                                   tScS_mn, frag_layout, acc_O, sh, n_pairs, p_begin, p_end, first_masked_pos, m_block,
                                   scale_log2, m_run, rm_own, row_sum, factor, mSem, ctid, c, ph0)
            else:
                for k in cutlass.range(n_pairs, unroll=1):
                    ph, pa, has_b, acc_S = self._pair_begin(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, q_regs, acc_O, factor,
                                                            k, 1, p_begin, p_end, mSem, ctid, c)
                    warpgroup.wait_group(0)
                    self._ev(mSem, ctid, c, k, 2)  # S_B done
                    if k == 0:
                        # pair 0 has no earlier max: take page A's (WG0 published it with P_A)
                        cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                        self._take_max(sh, SLOT_MAX_A, tScS_mn, m_run)
                    rPb = self._wg1_softmax_b(acc_S, tScS_mn, tPsP, sh, pa, has_b, first_masked_pos, m_block,
                                              scale_log2, m_run, rm_own, row_sum, mSem, ctid, c, k)
                    if k > 0:
                        cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                    self._ev(mSem, ctid, c, k, 3)  # P_A and rowmax S_A arrived
                    # page A's max, read before the S1 arrival: WG0 writes its next one only after S1, so this read
                    # comes first (page B's slot is the one that needs the parity: WG1 writes it with no barrier
                    # between)
                    self._next_max(sh, SLOT_MAX_A + k % 2, tScS_mn, scale_log2, m_run, rm_own, row_sum, factor)
                    cute.arch.barrier_arrive(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                    self._ev(mSem, ctid, c, k, 5)  # P_B and rowmax S_B published
                    self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 0], tOrV, 0, ph, 1)
                    self._ev(mSem, ctid, c, k, 4)  # P_A V_AR issued
                    self._wg1_pair_end(kv_pipe, pv_rs, acc_O, rPb, frag_layout, tOrV, ph, has_b, mSem, ctid, c, k)

        self._rescale(acc_O, factor)  # the last pair's factor: O relative to the tile's max, as the epilogue wants
        if cutlass.const_expr(self.redo_fallback):
            self._flag_rows(acc_O, row_sum, n_rows)
        self._hdr(mSem, ctid, 4 + c)  # loop end
        total = self._pair_epilogue(acc_O, tOgO, tScS_mn, m_run, row_sum, sh4, m_block, bi, split, c, ctid, mLp,
                                    scale_log2)
        if cutlass.const_expr(looping):
            q_pipe.consumer_release(q_state)  # O's TMA store has read Q's buffer: the next Q may land
        if cutlass.const_expr(self.redo_fallback and self.direct and not self.pair):
            # one split, nothing merged: the tile also goes on the list the persistent redo walks (the host passes
            # a zeroed int32 per tile in the counter argument's place; the redo zeroes what it takes)
            for r in cutlass.range_constexpr(n_rows):
                if total[r] != total[r]:
                    mSem[bi * self.m_blocks + m_block] = 1
        self._hdr(mSem, ctid, 6 + c)  # epilogue (and pair merge) done
        if c == 0:
            self._hdr(mSem, ctid, 9, True)

    @cute.jit
    def _pair_begin(self, kv_pipe, qk_mma, s_shape, tSrQ, tSrK, q_regs, acc_O, factor, k, page, p_begin, p_end, mSem,
                    ctid, c, ph0=None):
        """Pair k's start for the warpgroup of ``page`` (0: A, 1: B): the page's S GEMM issued, then this
        warpgroup's O rescaled to m_k beside it (pair k-1's P V are done).  A missing page B (an odd last page)
        gives S all -inf, so P 0 and rowmax -inf.  Returns (ring phase, page A's index, page B exists, S)."""
        ph = self._pass_parity(k, ph0)
        pa, has_b = self._pair_pages(k, p_begin, p_end)
        self._ev(mSem, ctid, c, k, 0)
        acc_S = self._s_page(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, page, ph, True if page == 0 else has_b, q_regs)
        self._ev(mSem, ctid, c, k, 1)  # S issued
        self._rescale(acc_O, factor)
        return ph, pa, has_b, acc_S

    @staticmethod
    def _slot_parity(k, ph, ph0):
        """Which of the two slots pair k's maxima cross in: k % 2, or in the persistent loop the ring pass's parity
        ``ph`` (it runs on across tiles, so a warpgroup a pair ahead never reuses a slot the other still reads)."""
        return k % 2 if ph0 is None else ph

    @cute.jit
    def _wg1_vr_first(self, kv_pipe, qk_mma, pv_mma, pv_rs, s_shape, tSrQ, tSrK, q_regs, tOrP, tOrV, tPsP, tScS_mn,
                      frag_layout, acc_O, sh, n_pairs, p_begin, p_end, first_masked_pos, m_block, scale_log2, m_run,
                      rm_own, row_sum, factor, mSem, ctid, c, ph0=None):
        """WG1's pair loop with v35_cute's order (P_A V_AR issued as soon as P_A arrives, page B's softmax while
        it runs) and the stale max: nothing stands between P_A's arrival and P_A V_AR (v35_cute adopts page A's
        max and rescales O_R there), so the pair's P V GEMMs finish sooner (run 22's probe: page B's stage held
        3,355 instead of 3,720 cycles).  The plain stale loop puts page B's softmax first, and run 22's trace
        found P_A V_AR, and with it page A's release, ~1,000 cycles later."""
        for k in cutlass.range(n_pairs, unroll=1):
            ph, pa, has_b, acc_S = self._pair_begin(kv_pipe, qk_mma, s_shape, tSrQ, tSrK, q_regs, acc_O, factor, k, 1,
                                                    p_begin, p_end, mSem, ctid, c, ph0)
            par = self._slot_parity(k, ph, ph0)
            cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
            self._ev(mSem, ctid, c, k, 3)  # P_A and rowmax S_A arrived
            if k == 0:
                self._take_max(sh, SLOT_MAX_A + (0 if ph0 is None else par), tScS_mn, m_run)  # m_0: page A's maxima
            self._pv(kv_pipe, pv_mma, acc_O, tOrP[None, None, None, 0], tOrV, 0, ph, 1)
            self._ev(mSem, ctid, c, k, 4)  # P_A V_AR issued
            warpgroup.wait_group(1)  # S_B done; P_A V_AR runs on
            self._ev(mSem, ctid, c, k, 2)  # S_B done
            rPb = self._wg1_softmax_b(acc_S, tScS_mn, tPsP, sh, pa, has_b, first_masked_pos, m_block, scale_log2,
                                      m_run, rm_own, row_sum, mSem, ctid, c, k, par)
            # page A's max, read before the S1 arrival (as in the plain stale loop)
            self._next_max(sh, SLOT_MAX_A + par, tScS_mn, scale_log2, m_run, rm_own, row_sum, factor)
            cute.arch.barrier_arrive(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
            self._ev(mSem, ctid, c, k, 5)  # P_B and rowmax S_B published
            self._wg1_pair_end(kv_pipe, pv_rs, acc_O, rPb, frag_layout, tOrV, ph, has_b, mSem, ctid, c, k)
            if cutlass.const_expr(ph0 is not None):
                self._stand_in_b(kv_pipe, ph, pa, p_end, True)

    @cute.jit
    def _wg1_softmax_b(self, acc_S, tScS_mn, tPsP, sh, pa, has_b, first_masked_pos, m_block, scale_log2, m_run, rm_own,
                       row_sum, mSem, ctid, c, k, par=None):
        """WG1's page-B softmax against the stale max, its row maxima published (slot by pair parity, ``par``
        when given: ``_slot_parity``) and P_B stored for WG0; returns P_B in registers (bf16) for WG1's own P_B
        V_BR."""
        self._stale_softmax(acc_S, tScS_mn, pa + 1, first_masked_pos, m_block, scale_log2, m_run, rm_own, row_sum, 1)
        self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
        self._publish_max(sh, SLOT_MAX_B + (k % 2 if par is None else par), tScS_mn, rm_own)
        rPb = self._bf16(acc_S)
        if has_b:
            self._store_p(rPb, tPsP[None, None, None, 1], c)
        self._ev(mSem, ctid, c, k, 9)  # P stored and fenced
        return rPb

    @cute.jit
    def _wg1_pair_end(self, kv_pipe, pv_rs, acc_O, rPb, frag_layout, tOrV, ph, has_b, mSem, ctid, c, k):
        """WG1's end of a pair, P_A V_AR already issued: P_B V_BR from registers, then page A's and page B's
        blocks released as their GEMMs complete."""
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
            if cutlass.const_expr(self.redo_fallback):
                # a rise this large may leave P finite and the factor flushed to 0 (a subnormal under ftz): the
                # pair's sum and O would vanish with no inf or NaN to show it, so the rise itself marks the row
                if ref_new * scale_log2 - ref_old * scale_log2 > RISE_LIMIT:
                    row_sum[r] = cutlass.Float32.nan
            m_run[r] = m_next


class MlaSplitSm90SeesawPairStaleVr(MlaSplitSm90SeesawPairStale):
    """The stale-max pair with WG1's P_A V_AR before page B's softmax (``_wg1_vr_first``); a probe kind."""

    stale_vr_first = True


class MlaSplitSm90SeesawPairStaleRedo(MlaSplitSm90SeesawPairStaleVr):
    """v57_cute's first launch: the stale-max pair (WG1's P_A V_AR first) with its unsure rows poisoned."""

    redo_fallback = True


class MlaSplitSm90SeesawPairC3EarlyRedo(MlaSplitSm90SeesawPairC3Early):
    """v57_cute's second launch: v35_cute's exact kernel over the tiles the first launch poisoned; every other
    CTA reads its tile's 64 lse values and exits (``MlaSplitSm90.kernel``)."""

    redo_guard = True

    @cute.jit
    def _tile_flagged(self, mLp, m_block, bi, split):
        """Whether any row of the tile has a NaN lse: each warp reads the 64 rows itself (two per lane) and
        votes, so every warp of the CTA -- and both CTAs of a merged pair, which read the same merged rows --
        decide alike with no barrier."""
        lane = cute.arch.lane_idx()
        slot = split // 2 if self.pair else split
        bad = cutlass.Boolean(False)
        for half in cutlass.range_constexpr(2):
            lse = self._load_lse(mLp, m_block * BLOCK_M + half * 32 + lane, bi, slot)
            if lse != lse:
                bad = cutlass.Boolean(True)
        return cute.arch.vote_any_sync(bad)

