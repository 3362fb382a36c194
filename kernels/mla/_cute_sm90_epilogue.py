"""Output side of the sm_90 CuTe DSL MLA split kernels: the O partition and the epilogue (a mixin).

``MlaSplitSm90`` (and through it every sm_90 consumer: half-page, seesaw, staggered) takes these
from ``SplitEpilogue``; they read the kernel's ``direct``, ``partial_bf16``, ``rows`` and ``h``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla._cute_sm90_parts import BLOCK_M, D_V, LN_2, _mn_view


class SplitEpilogue:
    """Where a consumer warpgroup's 64 x 256 slice of O goes, and how it is normalised and stored."""

    def _o_partition(self, thr_pv, mOp, bi, split, m_block, c):
        """This WG's (64 x 256) slice of the output (direct) or of its split's partial, as partitioned
        for the P V wgmma, and a zeroed fp32 accumulator of that shape.

        Consumers call it before their main loop: partitioning through pv_mma after it would use an
        accumulate flag last set inside a loop body (an escaping value).
        """
        if self.direct:
            gO = cute.local_tile(mOp[bi, None, None], (BLOCK_M, D_V // 2), (m_block, c))
        else:
            if self.pair:
                split = split // 2  # a merging pair of splits writes one partial
            gO = cute.local_tile(mOp[split, bi, None, None], (BLOCK_M, D_V // 2), (m_block, c))
        acc_O = cute.make_rmem_tensor(thr_pv.partition_shape_C((BLOCK_M, D_V // 2)), cutlass.Float32)
        acc_O.fill(0.0)
        return thr_pv.partition_C(gO), acc_O

    @cute.jit
    def _epilogue(self, acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp, scale_log2):
        """Divide this WG's O columns by the full row sums ``total``; store O and (WG 0) the lse.

        ``row_max`` is the final (unscaled) row maximum; ``tScS_mn`` gives each fragment row's
        row inside the 64-row block.  Direct: bf16 O and lse into the outputs (padding rows
        dropped); otherwise fp32 (or bf16) split partials and their lse.
        """
        acc_O_mn = _mn_view(acc_O)
        n_rows = cute.size(acc_O_mn.shape[0])
        for r in cutlass.range_constexpr(n_rows):
            empty = total[r] == 0.0
            inv = 0.0 if empty else cute.arch.rcp_approx(total[r])
            acc_O_mn[r, None] = acc_O_mn[r, None].load() * inv
            if c == 0 and ctid % 4 == 0:
                row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                lse = -cutlass.Float32.inf
                if not empty:
                    lse = (row_max[r] * scale_log2 + cute.math.log2(total[r], fastmath=True)) * LN_2
                self._store_lse(mLp, lse, row, bi, split)
        self._store_o(acc_O, tOgO, tScS_mn, m_block)

    @cute.jit
    def _store_lse(self, mLp, lse, row, bi, slot):
        """One row's lse: into the final lse (direct; padding rows dropped) or split partial ``slot``."""
        if cutlass.const_expr(self.direct):
            if row < self.rows:
                mLp[bi, row % self.h, row // self.h] = lse
        else:
            mLp[slot, bi, row] = lse

    @cute.jit
    def _store_o(self, acc_O, tOgO, tScS_mn, m_block):
        """This WG's normalised O: bf16 into the output (padding rows dropped), or the split partial (fp32 or bf16)."""
        bf16 = cutlass.BFloat16
        if cutlass.const_expr(self.direct):
            rO = cute.make_fragment_like(acc_O, bf16)
            rO.store(acc_O.load().to(bf16))
            rO_mn = _mn_view(rO)
            tOgO_mn = _mn_view(tOgO)
            for r in cutlass.range_constexpr(cute.size(rO_mn.shape[0])):
                if m_block * BLOCK_M + tScS_mn[r, 0][0] < self.rows:
                    cute.autovec_copy(rO_mn[r, None], tOgO_mn[r, None])
        elif cutlass.const_expr(self.partial_bf16):
            rO = cute.make_fragment_like(acc_O, bf16)
            rO.store(acc_O.load().to(bf16))
            cute.autovec_copy(rO, tOgO)
        else:
            cute.autovec_copy(acc_O, tOgO)
