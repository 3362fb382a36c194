"""Output side of the sm_90 CuTe DSL MLA split kernels: the O partition and the epilogue (a mixin).

``MlaSplitSm90`` (and through it every sm_90 consumer: half-page, seesaw, staggered) takes these
from ``SplitEpilogue``; they read the kernel's ``direct``, ``partial_bf16``, ``rows`` and ``h``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync
from cutlass.tensor_utils import LayoutEnum

from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, D_V, LN_2, PAGE, WG, _mn_view

#: named barriers BAR_O + c (c = 0, 1) order warpgroup c's TMA store of O (the seesaw's BAR_WG + c:
#: the same 128 threads, so sharing the ids is safe)
BAR_O = 7


class SplitEpilogue:
    """Where a consumer warpgroup's 64 x 256 slice of O goes, and how it is normalised and stored."""

    @property
    def o_via_tma(self) -> bool:
        """O leaves through shared memory and one TMA store per warpgroup (v28_cute): direct outputs only, and not
        in a persistent loop that loads the next Q during the epilogue (``loop_q_early``: O leaves from registers)."""
        return self.direct and self.tma_store_o and not (self.loop_q_early and self.looping)

    def _o_partition(self, thr_pv, mOp, bi, split, m_block, c):
        """This WG's (64 x 256) slice of the output (direct) or of its split's partial, as partitioned
        for the P V wgmma, and a zeroed fp32 accumulator of that shape.

        Consumers call it before their main loop: partitioning through pv_mma after it would use an
        accumulate flag last set inside a loop body (an escaping value).
        """
        if self.o_via_tma:
            # the staging tile in shared memory (see _store_o_tma), partitioned like the accumulator
            gO = self._o_store[2][None, None, c]
        elif self.direct:
            gO = cute.local_tile(mOp[bi, None, None], (BLOCK_M, D_V // 2), (m_block, c))
        else:
            if self.pair:
                split = split // 2  # a merging pair of splits writes one partial
            gO = cute.local_tile(mOp[split, bi, None, None], (BLOCK_M, D_V // 2), (m_block, c))
        acc_O = cute.make_rmem_tensor(thr_pv.partition_shape_C((BLOCK_M, D_V // 2)), cutlass.Float32)
        acc_O.fill(0.0)
        return thr_pv.partition_C(gO), acc_O

    def _o_tile(self, thr_pv, mOp, bi, m_block, c):
        """This WG's (64 x 256) slice of the direct output for tile (m_block, bi), partitioned like the P V
        accumulator: the persistent loop's register-store epilogue (``loop_q_early``), one view per tile."""
        return thr_pv.partition_C(cute.local_tile(mOp[bi, None, None], (BLOCK_M, D_V // 2), (m_block, c)))

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
        self._store_o(acc_O, tOgO, tScS_mn, m_block, bi)

    @cute.jit
    def _store_lse(self, mLp, lse, row, bi, slot):
        """One row's lse: into the final lse (direct; padding rows dropped) or split partial ``slot``."""
        if cutlass.const_expr(self.direct):
            if row < self.rows:
                mLp[bi, row % self.h, row // self.h] = lse
        else:
            mLp[slot, bi, row] = lse

    @cute.jit
    def _load_lse(self, mLp, row, bi, slot):
        """The lse ``_store_lse`` wrote for ``row`` (0 for a padding row of the final lse, which it never writes)."""
        lse = cutlass.Float32(0.0)
        if cutlass.const_expr(self.direct):
            if row < self.rows:
                lse = mLp[bi, row % self.h, row // self.h]
        else:
            lse = mLp[slot, bi, row]
        return lse

    @cute.jit
    def _store_o(self, acc_O, tOgO, tScS_mn, m_block, bi=None):
        """This WG's normalised O: bf16 into the output (padding rows dropped), or the split partial (fp32 or bf16)."""
        bf16 = cutlass.BFloat16
        if cutlass.const_expr(self.o_via_tma):
            self._store_o_tma(acc_O, tOgO, m_block, bi)
        elif cutlass.const_expr(self.direct):
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

    def _tma_store_args(self, op_ptr, b):
        """Host side of ``_store_o_tma``: the S2G TMA atom over the (rows, 512, b) output, its tensor and
        the staging layout (one 64 x 256 K-major SW128 half per warpgroup, 64 KB inside Q's 72 KB)."""
        sO_layout = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (BLOCK_M, PAGE, D_V // 2), cutlass.BFloat16, 2)
        mO3 = cute.make_tensor(op_ptr, cute.make_layout((self.rows, D_V, b), stride=(D_V, 1, self.rows * D_V)))
        o_tma, mOt = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), mO3, cute.slice_(sO_layout, (None, None, 0)), (BLOCK_M, D_V // 2)
        )
        return o_tma, mOt, sO_layout

    @cute.jit
    def _store_o_tma(self, acc_O, tOsO, m_block, bi=None):
        """v28_cute: this WG's bf16 O into its half of the staging tile, then one TMA store of the half.

        The tile overlays Q's buffer (every S GEMM is complete) and, in a merging pair, the
        exchange buffer: the first barrier waits until every thread of the WG has read its peer
        values.  TMA clips rows past the last one (no padding rows are written); the storing warp
        waits until the bulk copy has read the tile, so the CTA never exits under a running store.
        """
        tidx, _, _ = cute.arch.thread_idx()
        if cutlass.const_expr(not self.looping and not self.work_table):
            _, bi, _ = cute.arch.block_idx()  # (a looping or table-driven CTA passes its tile's sequence)
        c = tidx // WG - 1
        o_tma, mOt, sO = self._o_store
        rO = cute.make_fragment_like(acc_O, cutlass.BFloat16)
        rO.store(acc_O.load().to(cutlass.BFloat16))
        cute.arch.barrier(barrier_id=BAR_O + c, number_of_threads=WG)
        cute.autovec_copy(rO, tOsO)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier(barrier_id=BAR_O + c, number_of_threads=WG)
        store_warp = tidx % WG < 32  # one warp issues the store (warp-uniform: no branch beside a barrier)
        if cutlass.const_expr(self.looping):
            # the persistent loop (v36_cute) runs wgmmas after this branch: unless ptxas can see that the
            # branch is warp-uniform it serialises every wgmma of the kernel (C7520: spec +46%, run 13)
            store_warp = cute.arch.make_warp_uniform(tidx // 32) % 4 == 0
        if store_warp:
            gO = cute.flat_divide(mOt, (BLOCK_M, D_V // 2))  # (64, 256, m_blocks, 2, b)
            tOsO_t, tOgO_t = cpasync.tma_partition(
                o_tma, 0, cute.make_layout(1), cute.group_modes(sO, 0, 2), cute.group_modes(gO, 0, 2)
            )
            cute.copy(o_tma, tOsO_t[(None, c)], tOgO_t[(None, m_block, c, bi)])
            cute.arch.cp_async_bulk_commit_group()
            cute.arch.cp_async_bulk_wait_group(0, read=True)
            if cutlass.const_expr(self.looping):
                # only the electing lane's wait covers the store; the warp's Q-slot arrival (lane 0,
                # _cute_persistent) must come after it
                cute.arch.sync_warp()
