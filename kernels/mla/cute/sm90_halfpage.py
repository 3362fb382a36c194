"""The v4_cute..v7_cute consumer: two warpgroups split each 64-token page of S by tokens.

Consumer WG ``c`` (c = 0, 1) owns the O columns ``[256c, 256c + 256)`` and the page tokens
``[32c, 32c + 32)`` of S (m64n32 wgmma over K = 576, both operands in shared memory); the row
maxima are exchanged through shared memory, each WG writes its bf16 half of P into a 64 x 64
shared tile, and ``O_c += P V_c`` is an m64n256 wgmma chain.  ``pv_first`` (v5_cute) issues page
j's P V before page j+1's S so each stage is freed early; v4_cute issues S first and overlaps the
softmax with P V.  A mixin of ``MlaSplitSm90``, whose kernel calls ``_half_page_consumer`` in the
consumer warpgroups (the later ``_cute_seesaw`` replaces it).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.sm90_parts import (
    BAR_MAX, BAR_P_FREE, BAR_P_READY, BLOCK_M, CONSUMERS, D_QK, D_V, HALF, PAGE, _exp_row, _gemm, _masked_row_max,
    _mn_view, _quad_reduce,
)


class HalfPageConsumer:
    """Consumer warpgroups of v4_cute..v7_cute (see the module docstring)."""

    @cute.jit
    def _half_page_consumer(self, qk_mma, pv_mma, tidx, wg, m_block, bi, split, t, p_begin, n_iter,
                            q_pipe, kv_pipe, sQ, sKV, sV, sP, sRed, mOp, mLp, scale_log2):
        f32 = cutlass.Float32
        c = wg - 1
        ctid = tidx % 128
        thr_qk = qk_mma.get_slice(ctid)
        thr_pv = pv_mma.get_slice(ctid)

        tSrQ = qk_mma.make_fragment_A(thr_qk.partition_A(sQ))  # (MMA, 1, 36, 1)
        sK_c = cute.local_tile(sKV, (HALF, D_QK, self.stages), (c, 0, 0))
        tSrK = qk_mma.make_fragment_B(thr_qk.partition_B(sK_c))  # (MMA, 1, 36, stages)
        sV_c = cute.local_tile(sV, (D_V // 2, PAGE, self.stages), (c, 0, 0))
        tOrV = pv_mma.make_fragment_B(thr_pv.partition_B(sV_c))  # (MMA, 1, 4, stages)
        tOrP = pv_mma.make_fragment_A(thr_pv.partition_A(sP))  # (MMA, 1, 4)
        sP_c = cute.local_tile(sP, (BLOCK_M, HALF), (0, c))
        tPsP = thr_qk.partition_C(sP_c)
        cS = cute.local_tile(cute.make_identity_tensor((BLOCK_M, PAGE)), (BLOCK_M, HALF), (0, c))
        tScS_mn = _mn_view(thr_qk.partition_C(cS))

        tOgO, acc_O = self._o_partition(thr_pv, mOp, bi, split, m_block, c)
        acc_O_mn = _mn_view(acc_O)
        s_shape = thr_qk.partition_shape_C((BLOCK_M, HALF))
        n_rows = cute.size(acc_O_mn.shape[0])
        row_max = cute.make_rmem_tensor(n_rows, f32)
        row_sum = cute.make_rmem_tensor(n_rows, f32)
        alpha = cute.make_rmem_tensor(n_rows, f32)
        row_max.fill(-cutlass.Float32.inf)
        row_sum.fill(0.0)
        first_masked_pos = t - self.s + 1  # row with draft index i masks pos >= t - s + 1 + i

        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        q_pipe.consumer_wait(q_state)
        rd = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        rel = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)

        if n_iter > 0:
            # page 0: S, softmax, P -> smem (O is still zero: no P V yet)
            kv_pipe.consumer_wait(rd)
            acc_S = cute.make_rmem_tensor(s_shape, f32)
            acc_S.fill(0.0)
            warpgroup.fence()
            _gemm(qk_mma, acc_S, tSrQ[None, None, None, 0], tSrK[None, None, None, rd.index])
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            self._softmax(acc_S, tScS_mn, p_begin, first_masked_pos, m_block, c, ctid, scale_log2,
                          row_max, row_sum, alpha, sRed)
            self._publish_p(acc_S, tPsP)
            rd.advance()
            if cutlass.const_expr(self.pv_first):
                # v5_cute order: page j's P V, then page j+1's S.  P V completes first, so page
                # j's stage goes back to the producer while S runs (it can load page j+2 during
                # S + softmax); the softmax is not overlapped with tensor work any more.
                for j in cutlass.range(1, n_iter, unroll=1):
                    acc_S = cute.make_rmem_tensor(s_shape, f32)
                    acc_S.fill(0.0)
                    warpgroup.fence()
                    _gemm(pv_mma, acc_O, tOrP, tOrV[None, None, None, rel.index])
                    warpgroup.commit_group()
                    kv_pipe.consumer_wait(rd)
                    _gemm(qk_mma, acc_S, tSrQ[None, None, None, 0], tSrK[None, None, None, rd.index])
                    warpgroup.commit_group()
                    warpgroup.wait_group(1)  # P V of page j-1 done: its stage is free
                    kv_pipe.consumer_release(rel)
                    rel.advance()
                    warpgroup.wait_group(0)
                    # the max exchange inside is also the "both WGs finished reading P" barrier
                    self._softmax(acc_S, tScS_mn, p_begin + j, first_masked_pos, m_block, c, ctid, scale_log2,
                                  row_max, row_sum, alpha, sRed)
                    for r in cutlass.range_constexpr(n_rows):
                        if cutlass.const_expr(self.lazy_rescale):
                            # exact: alpha == 1 (the row max did not move) leaves O unchanged
                            if alpha[r] != 1.0:
                                acc_O_mn[r, None] = acc_O_mn[r, None].load() * alpha[r]
                        else:
                            acc_O_mn[r, None] = acc_O_mn[r, None].load() * alpha[r]
                    self._publish_p(acc_S, tPsP)
                    rd.advance()
            else:
                # v4_cute order: page j's S, then page j-1's P V; the softmax of page j overlaps
                # that P V, but page j-1's stage is released only after it (late for 2 stages)
                for j in cutlass.range(1, n_iter, unroll=1):
                    kv_pipe.consumer_wait(rd)
                    acc_S = cute.make_rmem_tensor(s_shape, f32)
                    acc_S.fill(0.0)
                    warpgroup.fence()
                    _gemm(qk_mma, acc_S, tSrQ[None, None, None, 0], tSrK[None, None, None, rd.index])
                    warpgroup.commit_group()
                    _gemm(pv_mma, acc_O, tOrP, tOrV[None, None, None, rel.index])
                    warpgroup.commit_group()
                    warpgroup.wait_group(1)  # S of page j is ready; P V of page j-1 still runs
                    self._softmax(acc_S, tScS_mn, p_begin + j, first_masked_pos, m_block, c, ctid, scale_log2,
                                  row_max, row_sum, alpha, sRed)
                    warpgroup.wait_group(0)
                    kv_pipe.consumer_release(rel)
                    rel.advance()
                    for r in cutlass.range_constexpr(n_rows):
                        acc_O_mn[r, None] = acc_O_mn[r, None].load() * alpha[r]
                    cute.arch.barrier(barrier_id=BAR_P_FREE, number_of_threads=CONSUMERS)
                    self._publish_p(acc_S, tPsP)
                    rd.advance()
            warpgroup.fence()
            _gemm(pv_mma, acc_O, tOrP, tOrV[None, None, None, rel.index])
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            kv_pipe.consumer_release(rel)

        # ---------------- epilogue: full row sums from both halves ---------------------
        for r in cutlass.range_constexpr(n_rows):
            sRed[c, ctid, r] = _quad_reduce(row_sum[r], lambda x, y: x + y)
        cute.arch.barrier(barrier_id=BAR_MAX, number_of_threads=CONSUMERS)
        total = cute.make_rmem_tensor(n_rows, f32)
        for r in cutlass.range_constexpr(n_rows):
            total[r] = sRed[0, ctid, r] + sRed[1, ctid, r]
        self._epilogue(acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp, scale_log2)

    @cute.jit
    def _softmax(self, acc_S, tScS_mn, p, first_masked_pos, m_block, c, ctid, scale_log2,
                 row_max, row_sum, alpha, sRed):
        """Mask page p, exchange row maxima with the other WG, turn S into P in place."""
        acc_S_mn = _mn_view(acc_S)
        n_rows = cute.size(acc_S_mn.shape[0])
        need_mask = p * PAGE + PAGE > first_masked_pos
        cur = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        for r in cutlass.range_constexpr(n_rows):
            cur[r] = _masked_row_max(acc_S_mn, tScS_mn, r, need_mask, p, first_masked_pos, m_block, self.h)
            sRed[c, ctid, r] = cur[r]
        cute.arch.barrier(barrier_id=BAR_MAX, number_of_threads=CONSUMERS)
        for r in cutlass.range_constexpr(n_rows):
            new_max = cute.arch.fmax(row_max[r], cute.arch.fmax(cur[r], sRed[1 - c, ctid, r]))
            _exp_row(acc_S_mn, r, row_max[r], new_max, scale_log2, row_sum, alpha)
            row_max[r] = new_max

    @cute.jit
    def _publish_p(self, acc_S, tPsP):
        """Store this WG's bf16 half of P, make it visible to wgmma (async proxy) and the other WG."""
        rP = cute.make_fragment_like(acc_S, cutlass.BFloat16)
        rP.store(acc_S.load().to(cutlass.BFloat16))
        cute.autovec_copy(rP, tPsP)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier(barrier_id=BAR_P_READY, number_of_threads=CONSUMERS)
