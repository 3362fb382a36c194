"""v10_cute: the seesaw split kernel whose last CTA per (sequence, row block) merges the splits.

Measured and discarded (run 5: +3.9% on decode vs v9_cute); kept as the worked example of a fused
combine.  ``_cute_seesaw``'s consumer calls ``_merge_splits`` only when ``fused_combine`` is set.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.seesaw import BAR_SUM, MlaSplitSm90SeesawChunked
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, CONSUMERS, D_V, LN_2, _mn_view

LOG2_E = 1.4426950408889634


class MlaSplitSm90SeesawFused(MlaSplitSm90SeesawChunked):
    """v10_cute: v9_cute whose last CTA per (sequence, row block) merges the splits (no combine launch)."""

    fused_combine = True

    def _merge_count(self, mLp):
        """The partials merged into each (sequence, row block): every slot (the tail kernel's count varies)."""
        return mLp.shape[0]

    @cute.jit
    def _merge_splits(self, thr_pv, acc_O, tScS_mn, m_run, total, m_block, bi, split, c, ctid, sh,
                      mOp, mLp, mOut, mLse, mSem, scale_log2):
        """The combine, fused: the last CTA of (sequence, row block) to finish merges every split.

        Each CTA has stored its normalised partial and lse (``_epilogue``); it makes them visible
        GPU-wide, then counts itself in on the block's counter.  The CTA that arrives last keeps
        its own O in registers, reads the other splits' partials and writes the bf16 output and
        the lse: ``out = sum_z e^(lse_z - lse) O_z``, ``lse = log sum_z e^lse_z`` (a split that saw
        no key has lse -inf and weighs 0).
        """
        f32 = cutlass.Float32
        splits = self._merge_count(mLp)
        n_rows = cute.size(m_run)
        if self._count_in(sh, bi, m_block, c, ctid, mSem, True) == f32(splits - 1):
            cute.arch.fence_acq_rel_gpu()
            acc_O_mn = _mn_view(acc_O)
            top = cute.make_rmem_tensor(n_rows, f32)
            lse_own = cute.make_rmem_tensor(n_rows, f32)
            denom = cute.make_rmem_tensor(n_rows, f32)
            for r in cutlass.range_constexpr(n_rows):
                row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                lse_own[r] = -cutlass.Float32.inf
                if total[r] != 0.0:
                    lse_own[r] = (m_run[r] * scale_log2 + cute.math.log2(total[r], fastmath=True)) * LN_2
                top[r] = lse_own[r]
                for z in cutlass.range(splits, unroll=1):
                    top[r] = cute.arch.fmax(top[r], mLp[z, bi, row])
                if top[r] == -cutlass.Float32.inf:
                    top[r] = 0.0
                denom[r] = 0.0
                for z in cutlass.range(splits, unroll=1):
                    denom[r] = denom[r] + cute.math.exp2((mLp[z, bi, row] - top[r]) * LOG2_E, fastmath=True)
                inv = 0.0 if denom[r] == 0.0 else cute.arch.rcp_approx(denom[r])
                # own weight; mLp[split] holds lse_own too, so the sums above already include it
                acc_O_mn[r, None] = acc_O_mn[r, None].load() * (
                    cute.math.exp2((lse_own[r] - top[r]) * LOG2_E, fastmath=True) * inv
                )
                denom[r] = inv
            for z in cutlass.range(splits, unroll=1):
                if z != split:
                    tOgZ = thr_pv.partition_C(cute.local_tile(mOp[z, bi, None, None], (BLOCK_M, D_V // 2), (m_block, c)))
                    part = cute.make_fragment_like(acc_O, f32)
                    cute.autovec_copy(tOgZ, part)
                    part_mn = _mn_view(part)
                    for r in cutlass.range_constexpr(n_rows):
                        row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                        w = cute.math.exp2((mLp[z, bi, row] - top[r]) * LOG2_E, fastmath=True) * denom[r]
                        acc_O_mn[r, None] = acc_O_mn[r, None].load() + part_mn[r, None].load() * w
            self._store_merged(thr_pv, acc_O, tScS_mn, top, denom, m_block, bi, c, ctid, mOut, mLse)
            if cutlass.const_expr(self.work_table):
                if c == 0 and ctid == 0:
                    mSem[bi * self.m_blocks + m_block] = 0  # the tail's counters reset themselves for the next call

    @cute.jit
    def _store_merged(self, thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut, mLse,
                      write_o: cutlass.Constexpr = True):
        """The merged O (bf16, from registers) and lse into the final outputs (padding rows dropped); ``top`` is
        each row's largest lse, ``inv`` 1 / its sum of weights (0 when no split saw a key).  ``write_o`` False:
        the lse only (a probe kind's, ``_cute_seesaw_tail``)."""
        rO = cute.make_fragment_like(acc_O, cutlass.BFloat16)
        rO.store(acc_O.load().to(cutlass.BFloat16))
        rO_mn = _mn_view(rO)
        tOgOut_mn = _mn_view(thr_pv.partition_C(cute.local_tile(mOut[bi, None, None], (BLOCK_M, D_V // 2),
                                                                (m_block, c))))
        for r in cutlass.range_constexpr(cute.size(rO_mn.shape[0])):
            row = m_block * BLOCK_M + tScS_mn[r, 0][0]
            if row < self.rows:
                if cutlass.const_expr(write_o):
                    cute.autovec_copy(rO_mn[r, None], tOgOut_mn[r, None])
                if c == 0 and ctid % 4 == 0:
                    # lse = top + log(sum) = top - log(1 / sum)
                    lse = -cutlass.Float32.inf
                    if inv[r] != 0.0:
                        lse = top[r] - cute.math.log2(inv[r], fastmath=True) * LN_2
                    mLse[bi, row % self.h, row // self.h] = lse

    @cute.jit
    def _count_in(self, sh, bi, m_block, c, ctid, mSem, fenced: cutlass.Constexpr):
        """Count this CTA in on its (sequence, row block) counter; returns how many had counted in before it (thread
        0's atomic, shared through ``sh[2, 0]``).  ``fenced``: every consumer thread fences its partial stores first
        (v10_cute); else the CTA barrier before thread 0's acq_rel atomic orders them (v55_cute)."""
        if cutlass.const_expr(fenced):
            cute.arch.fence_acq_rel_gpu()
        cute.arch.barrier(barrier_id=BAR_SUM, number_of_threads=CONSUMERS)
        if c == 0 and ctid == 0:
            old = cute.arch.atomic_add(mSem.iterator + (bi * self.m_blocks + m_block), cutlass.Int32(1),
                                       sem="acq_rel", scope="gpu")
            sh[2, 0] = cutlass.Float32(old)
        cute.arch.barrier(barrier_id=BAR_SUM, number_of_threads=CONSUMERS)
        return sh[2, 0]
