"""CuTe DSL MLA split kernel for Hopper, *staggered* seesaw: v12_cute's algebra, FlashMLA's timing.

Same CTA, pairs of pages (A in stage 0, B in stage 1) and running-max algebra as ``_cute_seesaw``
(WG0 owns O's left half and page A's softmax, WG1 the right half and page B's).  Three changes to
when things happen, one design:

* **Own P from registers.**  A warpgroup's P V of its own page is an rs-wgmma whose A operand is
  the bf16 copy of its softmax output (the m64n64 accumulator and the m64k16 A fragment give each
  thread the same elements in the same order).  Only the *other* warpgroup's P goes through
  shared memory: P_B into page B's RoPE block (as before), P_A into the CTA's spare 8 KB P tile.
* **Staggered GEMMs.**  WG0 issues S_A of the next pair right behind its P_B V_BL; WG1 issues S_B
  after both its P V.  So WG0's softmax of A runs under WG1's S_B and WG1's softmax of B under
  WG0's P_A V_AL: the tensor pipe is never left with only softmax work.  P_A reaches WG1 already
  rescaled to m1 (WG0 multiplies it by e(m0 - m1) once it knows m1), so O_R needs one rescale.
* **Block-wise release and load order.**  Each 64 x 64 block of a page is released by each
  warpgroup at its own last use (a warpgroup releases blocks it never reads once it has waited
  on a block loaded after them, so its arrival cannot count towards the previous phase), and the
  producer loads a pair's blocks in the order they come free: A8 (rope, read by S_A only),
  A0-3 (free after P_A V_AL), B4-7 (after P_B V_BR), A4-7 (after P_A V_AR), B0-3, B8 (P_B).
  S_A is issued as blocks 8, 0-3 then 4-7, S_B as 4-7, 0-3, 8.

Per pair k (m = running max before the pair, m0 after A, m1 after B, e(x) = exp2(x scale_log2)):

* WG0: release A8, A4-7; P_A = e(S_A - m0), publish m0 (S0); O_L = O_L e(m - m0) + P_A V_AL
  (registers); wait m1 (S1); P_A e(m0 - m1) -> smem (PA); wait P_A V_AL, release A0-3;
  O_L *= e(m0 - m1); wait P_B (PB); O_L += P_B V_BL; issue S_A(k+1) blocks 8, 0-3; wait P_B
  V_BL, release B0-8; issue S_A(k+1) blocks 4-7; wait.
* WG1: release A8, A0-3, B0-3; wait m0 (S0); P_B = e(S_B - m1), publish m1 (S1);
  O_R = O_R e(m - m1) + P_B V_BR (registers); P_B -> page B's rope block (PB); wait P_A (PA);
  O_R += P_A' V_AR; wait P_B V_BR, release B4-8; wait P_A V_AR, release A4-7; issue S_B(k+1).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.seesaw import MlaSplitSm90SeesawChunked
from kforge_kernels.mla.cute.sm90_parts import (
    BLOCK_M, CONSUMERS, D_QK, D_V, PAGE, _mn_view,
)

# named barriers (256 consumer threads): m0 published / m1 published (row sums: the seesaw's BAR_SUM = 6) /
# P_A stored / P_B stored / WG1's P_A V_AR issued (v17_cute)
BAR_S0, BAR_S1, BAR_PA, BAR_PB, BAR_AR = 4, 5, 7, 8, 9
WG = 128
#: the order the producer loads a pair's 64 x 64 blocks in: (stage, block), stage 0 = page A
LOAD_ORDER = ((0, 8), (0, 0), (0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6), (1, 7),
              (0, 4), (0, 5), (0, 6), (0, 7), (1, 0), (1, 1), (1, 2), (1, 3), (1, 8))
SA_FIRST, SA_SECOND = (8, 0, 1, 2, 3), (4, 5, 6, 7)
SB_ORDER = (4, 5, 6, 7, 0, 1, 2, 3, 8)
V_LEFT, V_RIGHT, ROPE = (0, 1, 2, 3), (4, 5, 6, 7), (8,)


class MlaSplitSm90Stagger(MlaSplitSm90SeesawChunked):
    """v15_cute: v12_cute's split kernel with the staggered seesaw schedule (see the module doc)."""

    stagger = True
    #: WG0 issues P_B V_BL and the next S_A only after WG1 has issued P_A V_AR (v17_cute), so the
    #: GEMM that frees A4-7 and lets WG1 start S_B is not queued behind 20 k-steps of S_A
    order_pv_ar = False

    @cute.jit
    def _produce_pairs(self, tma_kv, tKgK, tKsK, kv_pipe, mBT, bi, p_begin, p_end, n_iter):
        """Load each pair's 18 blocks in ``LOAD_ORDER`` (page B's only when the pair has one)."""
        n_pairs = (n_iter + 1) // 2
        for k in cutlass.range(n_pairs, unroll=1):
            pa, has_b = self._pair_pages(k, p_begin, p_end)
            page_a, page_b = self._pair_block_ids(mBT, bi, pa, p_end)
            ph = (k + 1) % 2  # a producer waits on the empty barriers' previous phase
            for i in cutlass.range_constexpr(len(LOAD_ORDER)):
                stage, j = LOAD_ORDER[i]
                if cutlass.const_expr(stage == 0):
                    self._load_block(tma_kv, tKgK, tKsK, kv_pipe, page_a, stage, j, ph)
                else:
                    if has_b:
                        self._load_block(tma_kv, tKgK, tKsK, kv_pipe, page_b, stage, j, ph)

    @cute.jit
    def _load_block(self, tma_kv, tKgK, tKsK, kv_pipe, page, stage: cutlass.Constexpr, j: cutlass.Constexpr, ph):
        state = self._chunk(stage, j, ph)
        kv_pipe.producer_acquire(state)
        idx = stage * self.kv_chunks + j
        self._kv_copy(tma_kv, tKgK[(None, 0, j, page)], tKsK[(None, idx)], kv_pipe.producer_get_barrier(state))

    @cute.jit
    def _stagger_consumer(self, qk_mma, pv_mma, pv_rs, tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter,
                          q_pipe, kv_pipe, sQ, sKV, sV, sP, sRed, mOp, mLp, scale_log2):
        f32 = cutlass.Float32
        c = wg - 1
        ctid = tidx % WG
        thr_qk = qk_mma.get_slice(ctid)
        thr_pv = pv_mma.get_slice(ctid)
        tSrQ = qk_mma.make_fragment_A(thr_qk.partition_A(sQ))  # (MMA, 1, 36, 1)
        tSrK = qk_mma.make_fragment_B(thr_qk.partition_B(sKV))  # (MMA, 1, 36, stages)
        sV_c = cute.local_tile(sV, (D_V // 2, PAGE, self.stages), (c, 0, 0))
        tOrV = pv_mma.make_fragment_B(thr_pv.partition_B(sV_c))  # (MMA, 1, 4, stages)
        # P_B lives in page B's RoPE block; P_A (already rescaled to m1) in the CTA's P tile
        sRope = cute.local_tile(sKV, (PAGE, D_QK - D_V, self.stages), (0, D_V // (D_QK - D_V), 0))
        tOrPB = pv_mma.make_fragment_A(thr_pv.partition_A(sRope))[None, None, None, 1]  # (MMA, 1, 4)
        tOrPA = pv_mma.make_fragment_A(thr_pv.partition_A(sP))  # (MMA, 1, 4)
        tPsB = thr_qk.partition_C(sRope)[None, None, None, 1]
        tPsA = thr_qk.partition_C(sP)
        tScS_mn = _mn_view(thr_qk.partition_C(cute.make_identity_tensor((BLOCK_M, PAGE))))
        frag_layout = pv_rs.make_fragment_A(pv_rs.get_slice(ctid).partition_shape_A((BLOCK_M, PAGE))).layout
        # slots: 0 = m0 (WG0 writes), 1 = m1 (WG1 writes), 2 + c = WG c's row sums
        sh = cute.make_tensor(sRed.iterator, cute.make_layout((4, BLOCK_M), stride=(BLOCK_M, 1)))

        tOgO, acc_O = self._o_partition(thr_pv, mOp, bi, split, m_block, c)
        n_rows, m_run, row_sum, scale, scale2 = self._row_state(acc_O, 2)
        first_masked_pos = t - self.s + 1
        acc_S = cute.make_rmem_tensor(thr_qk.partition_shape_C((BLOCK_M, PAGE)), f32)

        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        q_pipe.consumer_wait(q_state)
        n_pairs = (n_iter + 1) // 2

        if c == 0:
            if n_pairs > 0:
                acc_S.fill(0.0)
                self._qk_blocks(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 0, 0, SA_FIRST + SA_SECOND)
                warpgroup.wait_group(0)
            for k in cutlass.range(n_pairs, unroll=1):
                ph = k % 2
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                # S_A read A8 and A4-7 for the last time
                self._release_blocks(kv_pipe, 0, ph, ROPE + V_RIGHT)
                self._page_softmax(acc_S, tScS_mn, pa, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale)
                self._publish_max(sh, 0, tScS_mn, m_run)
                cute.arch.barrier_arrive(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                rPa = self._p_operand(self._bf16(acc_S), frag_layout)
                self._rescale(acc_O, scale)
                self._pv_gemm(pv_rs, acc_O, rPa, tOrV, 0)  # O_L += P_A V_AL
                cute.arch.barrier(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                self._adopt_max(sh, 1, tScS_mn, scale_log2, m_run, row_sum, scale)  # scale = e(m0 - m1)
                # P_A rescaled to m1 for WG1's O_R
                self._rescale(acc_S, scale)
                cute.autovec_copy(self._bf16(acc_S), tPsA)
                cute.arch.fence_proxy("async.shared", space="cta")
                cute.arch.barrier_arrive(barrier_id=BAR_PA, number_of_threads=CONSUMERS)
                warpgroup.wait_group(0)  # P_A V_AL
                self._release_blocks(kv_pipe, 0, ph, V_LEFT)
                self._rescale(acc_O, scale)
                if cutlass.const_expr(self.order_pv_ar):
                    cute.arch.barrier(barrier_id=BAR_AR, number_of_threads=CONSUMERS)
                if has_b:
                    cute.arch.barrier(barrier_id=BAR_PB, number_of_threads=CONSUMERS)
                    self._wait_blocks(kv_pipe, 1, ph, V_LEFT)
                    self._pv_gemm(pv_mma, acc_O, tOrPB, tOrV, 1)  # O_L += P_B V_BL
                if k + 1 < n_pairs:
                    # a pair before the last always has a page B: P_B V_BL is in flight
                    acc_S.fill(0.0)
                    self._qk_blocks(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 0, 1 - ph, SA_FIRST)
                    warpgroup.wait_group(1)  # P_B V_BL
                    self._release_blocks(kv_pipe, 1, ph, V_LEFT + V_RIGHT + ROPE)
                    self._qk_blocks(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 0, 1 - ph, SA_SECOND)
                    warpgroup.wait_group(0)
                else:
                    warpgroup.wait_group(0)
        else:
            if n_pairs > 0:
                if p_begin + 1 < p_end:
                    acc_S.fill(0.0)
                    self._qk_blocks(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 1, 0, SB_ORDER)
                    warpgroup.wait_group(0)
                else:
                    acc_S.fill(-cutlass.Float32.inf)
            for k in cutlass.range(n_pairs, unroll=1):
                ph = k % 2
                pa, has_b = self._pair_pages(k, p_begin, p_end)
                if has_b:
                    # S_B waited on B4-7, loaded after A8 and A0-3: those phases are complete
                    self._release_blocks(kv_pipe, 0, ph, ROPE + V_LEFT)
                    self._release_blocks(kv_pipe, 1, ph, V_LEFT)
                cute.arch.barrier(barrier_id=BAR_S0, number_of_threads=CONSUMERS)
                self._adopt_max(sh, 0, tScS_mn, scale_log2, m_run, row_sum, scale)  # e(m - m0)
                self._page_softmax(acc_S, tScS_mn, pa + 1, first_masked_pos, m_block, scale_log2, m_run, row_sum,
                                   scale2)  # e(m0 - m1); no page B: S = -inf, P = 0, m1 = m0
                self._publish_max(sh, 1, tScS_mn, m_run)
                cute.arch.barrier_arrive(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
                for r in cutlass.range_constexpr(n_rows):
                    scale[r] = scale[r] * scale2[r]
                self._rescale(acc_O, scale)
                rPb = self._bf16(acc_S)
                rPb_a = self._p_operand(rPb, frag_layout)
                if has_b:
                    self._pv_gemm(pv_rs, acc_O, rPb_a, tOrV, 1)  # O_R += P_B V_BR
                    cute.autovec_copy(rPb, tPsB)
                    cute.arch.fence_proxy("async.shared", space="cta")
                    cute.arch.barrier_arrive(barrier_id=BAR_PB, number_of_threads=CONSUMERS)
                cute.arch.barrier(barrier_id=BAR_PA, number_of_threads=CONSUMERS)
                self._wait_blocks(kv_pipe, 0, ph, V_RIGHT)
                if not has_b:
                    self._release_blocks(kv_pipe, 0, ph, ROPE + V_LEFT)
                self._pv_gemm(pv_mma, acc_O, tOrPA, tOrV, 0)  # O_R += P_A' V_AR
                if cutlass.const_expr(self.order_pv_ar):
                    cute.arch.barrier_arrive(barrier_id=BAR_AR, number_of_threads=CONSUMERS)
                if has_b:
                    warpgroup.wait_group(1)  # P_B V_BR
                    self._release_blocks(kv_pipe, 1, ph, V_RIGHT + ROPE)
                warpgroup.wait_group(0)  # P_A V_AR
                self._release_blocks(kv_pipe, 0, ph, V_RIGHT)
                if k + 1 < n_pairs:
                    if pa + 3 < p_end:
                        acc_S.fill(0.0)
                        self._qk_blocks(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 1, 1 - ph, SB_ORDER)
                        warpgroup.wait_group(0)
                    else:
                        acc_S.fill(-cutlass.Float32.inf)

        self._pair_epilogue(acc_O, tOgO, tScS_mn, m_run, row_sum, sh, m_block, bi, split, c, ctid, mLp, scale_log2)


class MlaSplitSm90StaggerEvict(MlaSplitSm90Stagger):
    """v16_cute: v15_cute with the L2 evict-first hint on every KV block load (FlashMLA's choice)."""

    evict_first = True


class MlaSplitSm90StaggerOrdered(MlaSplitSm90StaggerEvict):
    """v17_cute: v16_cute with WG0's P_B V_BL and next S_A issued after WG1's P_A V_AR."""

    order_pv_ar = True
