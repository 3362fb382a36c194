"""v2 CuTe DSL MLA split kernel: v1 without the duplicated QK^T.

v1 lets both 4-warp column groups compute the full 64x64 S tile.  Here group g computes only
S[:, 32g:32g+32] (the same 4-warp tiled MMA, on half of the page rows), so QK^T work drops from
2x576 to 576 per KV row.  The two halves meet in shared memory:

* row max: thread ``mtid`` of group g holds the same rows as thread ``mtid`` of group 1-g, so
  each thread publishes its quad-reduced maxima in ``sRed[g, mtid, r]`` and reads its partner's;
  both groups then use the identical running max, hence the identical rescale factor;
* P: each group stores its bf16 probabilities into its own 64x32 half of ``sP`` (the halves are
  2048 elements apart, each 64B-row swizzled); after a barrier both groups ldmatrix the full P
  as the A operand of their half of O = P V.  ``_cute_ptxreplay`` checks these addresses in the
  PTX (the first GPU run failed because group 1's stores landed on wrong cells, see there);
* row sums stay per-group partial until the epilogue, where the partners add them.

Per page: barrier A (page landed; the prefetch of the next page is issued right after it, when
every warp is done with the stage it overwrites), barrier B (maxima published), barrier C (P
published).  No end-of-page barrier is needed: the next writes to sRed/sP/stage all follow A.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync, warp

from kforge_kernels.mla.cute.sm80 import BLOCK_M, D_QK, D_V, LN_2, PAGE, MlaSplitSm80, _mn_view, _quad_reduce

HALF = PAGE // 2


class MlaSplitSm80Dedup(MlaSplitSm80):
    """Partial MLA attention over one KV split; S split across the two column groups."""

    @cute.jit
    def __call__(
        self,
        q_ptr: cute.Pointer,
        kv_ptr: cute.Pointer,
        bt_ptr: cute.Pointer,
        lens_ptr: cute.Pointer,
        op_ptr: cute.Pointer,
        lp_ptr: cute.Pointer,
        b: cutlass.Int32,
        num_blocks: cutlass.Int32,
        max_blocks: cutlass.Int32,
        splits: cutlass.Int32,
        scale_log2: cutlass.Float32,
        stream: cuda.CUstream,
    ):
        bf16 = cutlass.BFloat16
        mQ = cute.make_tensor(q_ptr, cute.make_ordered_layout((b, self.rows, D_QK), order=(2, 1, 0)))
        mKV = cute.make_tensor(kv_ptr, cute.make_ordered_layout((num_blocks, PAGE, D_QK), order=(2, 1, 0)))
        mBT = cute.make_tensor(bt_ptr, cute.make_ordered_layout((b, max_blocks), order=(1, 0)))
        mLens = cute.make_tensor(lens_ptr, cute.make_layout(b))
        if cutlass.const_expr(self.direct):
            # op_ptr/lp_ptr are the caller's out [b, s*h, 512] bf16 and lse [b, h, s] fp32
            mOp = cute.make_tensor(op_ptr, cute.make_ordered_layout((b, self.rows, D_V), order=(2, 1, 0)))
            mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((b, self.h, self.s), order=(2, 1, 0)))
        else:
            mOp = cute.make_tensor(
                op_ptr, cute.make_ordered_layout((splits, b, self.rows_pad, D_V), order=(3, 2, 1, 0))
            )
            mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((splits, b, self.rows_pad), order=(2, 1, 0)))

        atom = cute.make_composed_layout(
            cute.make_swizzle(3, 3, 3), 0, cute.make_layout((8, 64), stride=(64, 1))
        )
        sQ_layout = cute.tile_to_shape(atom, (BLOCK_M, D_QK), (0, 1))
        sKV_layout = cute.tile_to_shape(atom, (PAGE, D_QK, self.stages), (0, 1, 2))
        # P: two 64x32 halves, 2048 elements apart, each 64B-row swizzled (Swizzle<2,3,3>: conflict-free
        # for the C-layout stores and the ldmatrix reads).  Why not the 128B atom above: group 1's half
        # would start at column 32, an offset inside the swizzle's XOR bits, and the DSL (4.8.1)
        # lowers such a swizzled-tensor offset wrongly (adds it AND xors it in; see notes/cute.md).
        atom_p = cute.make_composed_layout(
            cute.make_swizzle(2, 3, 3), 0, cute.make_layout((8, HALF), stride=(HALF, 1))
        )
        sP_layout = cute.tile_to_shape(atom_p, (BLOCK_M, PAGE), (0, 1))
        # (group, thread in group, row slot): partner exchange of maxima and sums
        red_layout = cute.make_layout((2, 128, 2), stride=(256, 2, 1))

        @cute.struct
        class Smem:
            sQ: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sQ_layout)], 1024]
            sKV: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sKV_layout)], 1024]
            sP: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sP_layout)], 1024]
            sRed: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, cute.cosize(red_layout)], 16]

        g2s = cute.make_copy_atom(
            cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), bf16, num_bits_per_copy=128
        )
        tiled_g2s = cute.make_tiled_copy_tv(
            g2s, cute.make_layout((self.threads // 8, 8), stride=(8, 1)), cute.make_layout((1, 8))
        )
        tiled_mma = cute.make_tiled_mma(
            warp.MmaF16BF16Op(bf16, cutlass.Float32, (16, 8, 16)), (4, 1, 1), permutation_mnk=(64, 16, 16)
        )
        self.kernel(
            mQ, mKV, mBT, mLens, mOp, mLp, scale_log2, sQ_layout, sKV_layout, sP_layout, red_layout,
            tiled_g2s, tiled_mma, Smem,
        ).launch(grid=(self.m_blocks, b, splits), block=(self.threads, 1, 1), stream=stream)

    @cute.kernel
    def kernel(
        self,
        mQ: cute.Tensor,
        mKV: cute.Tensor,
        mBT: cute.Tensor,
        mLens: cute.Tensor,
        mOp: cute.Tensor,
        mLp: cute.Tensor,
        scale_log2: cutlass.Float32,
        sQ_layout: cute.ComposedLayout,
        sKV_layout: cute.ComposedLayout,
        sP_layout: cute.ComposedLayout,
        red_layout: cute.Layout,
        tiled_g2s: cute.TiledCopy,
        tiled_mma: cute.TiledMma,
        Smem: cutlass.Constexpr,
    ):
        bf16 = cutlass.BFloat16
        tidx, _, _ = cute.arch.thread_idx()
        m_block, bi, split = cute.arch.block_idx()
        _, _, splits = cute.arch.grid_dim()
        grp = tidx // 128
        mtid = tidx % 128

        t = mLens[bi]
        n_pages = (t + PAGE - 1) // PAGE
        chunk = (n_pages + splits - 1) // splits
        p_begin = split * chunk
        p_end = cutlass.min(p_begin + chunk, n_pages)
        first_masked_pos = t - self.s + 1

        smem = cutlass.utils.SmemAllocator()
        st = smem.allocate(Smem)
        sQ = st.sQ.get_tensor(sQ_layout)
        sKV = st.sKV.get_tensor(sKV_layout)
        sP = st.sP.get_tensor(sP_layout)
        sRed = st.sRed.get_tensor(red_layout)

        thr_g2s = tiled_g2s.get_slice(tidx)
        gQ = cute.local_tile(mQ[bi, None, None], (BLOCK_M, D_QK), (m_block, 0))
        tQgQ = thr_g2s.partition_S(gQ)
        tQsQ = thr_g2s.partition_D(sQ)
        cQ = cute.local_tile(cute.make_identity_tensor((self.rows_pad, D_QK)), (BLOCK_M, D_QK), (m_block, 0))
        tQcQ = thr_g2s.partition_S(cQ)
        for m in cutlass.range_constexpr(cute.size(tQsQ.shape[1])):
            if tQcQ[0, m, 0][0] < self.rows:
                cute.copy(tiled_g2s, tQgQ[None, m, None], tQsQ[None, m, None])
        tKVsKV = thr_g2s.partition_D(sKV)

        thr_mma = tiled_mma.get_slice(mtid)
        s2r_A = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), bf16)
        s2r_Vt = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), bf16)
        tiled_s2r_A = cute.make_tiled_copy_A(s2r_A, tiled_mma)
        tiled_s2r_K = cute.make_tiled_copy_B(s2r_A, tiled_mma)
        tiled_s2r_V = cute.make_tiled_copy_B(s2r_Vt, tiled_mma)
        s2r_Aq = tiled_s2r_A.get_slice(mtid)
        s2r_K = tiled_s2r_K.get_slice(mtid)
        s2r_V = tiled_s2r_V.get_slice(mtid)
        # registers -> sP (this group's 32 columns), in the accumulator's own layout
        r2s_P = cute.make_tiled_copy_C(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), bf16), tiled_mma)
        r2s_P_thr = r2s_P.get_slice(mtid)
        sP_g = cute.local_tile(sP, (BLOCK_M, HALF), (0, grp))
        tPsP = r2s_P_thr.partition_D(sP_g)

        tSrQ = thr_mma.make_fragment_A(thr_mma.partition_A(sQ))
        tSsQ = s2r_Aq.partition_S(sQ)
        tSrQ_v = s2r_Aq.retile(tSrQ)
        tOrP = thr_mma.make_fragment_A(thr_mma.partition_A(sP))
        tOsP = s2r_Aq.partition_S(sP)
        tOrP_v = s2r_Aq.retile(tOrP)

        acc_O = cute.make_rmem_tensor(thr_mma.partition_shape_C((BLOCK_M, D_V // 2)), cutlass.Float32)
        acc_O.fill(0.0)
        acc_O_mn = _mn_view(acc_O)
        n_rows = cute.size(acc_O_mn.shape[0])
        row_max = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        row_sum = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        row_max.fill(-cutlass.Float32.inf)
        row_sum.fill(0.0)
        # coordinates of this thread's S elements inside the 64 x 64 page tile
        cS = cute.local_tile(cute.make_identity_tensor((BLOCK_M, PAGE)), (BLOCK_M, HALF), (0, grp))
        tScS_mn = _mn_view(thr_mma.partition_C(cS))

        if p_begin < p_end:
            gKV0 = mKV[mBT[bi, p_begin], None, None]
            cute.copy(tiled_g2s, thr_g2s.partition_S(gKV0), tKVsKV[None, None, None, 0])
        cute.arch.cp_async_commit_group()

        for p in range(p_begin, p_end):
            stage = (p - p_begin) % self.stages
            cute.arch.cp_async_wait_group(0)
            cute.arch.barrier()  # A: page p (and Q) landed; every warp is done with page p-1
            if p + 1 < p_end:
                gKVn = mKV[mBT[bi, p + 1], None, None]
                cute.copy(
                    tiled_g2s, thr_g2s.partition_S(gKVn), tKVsKV[None, None, None, (stage + 1) % self.stages]
                )
            cute.arch.cp_async_commit_group()

            sK = sKV[None, None, stage]
            sK_g = cute.local_tile(sK, (HALF, D_QK), (grp, 0))
            sVt = cute.composition(sK, cute.make_layout((D_V, PAGE), stride=(PAGE, 1)))
            sVt_g = cute.local_tile(sVt, (D_V // 2, PAGE), (grp, 0))

            # ---- S_g = Q K_g^T (64 x 32) ------------------------------------------------
            tSrK = thr_mma.make_fragment_B(thr_mma.partition_B(sK_g))
            tSsK = s2r_K.partition_S(sK_g)
            tSrK_v = s2r_K.retile(tSrK)
            acc_S = cute.make_rmem_tensor(thr_mma.partition_shape_C((BLOCK_M, HALF)), cutlass.Float32)
            acc_S.fill(0.0)
            for k in cutlass.range_constexpr(cute.size(tSsQ.shape[2])):
                cute.copy(tiled_s2r_A, tSsQ[None, None, k], tSrQ_v[None, None, k])
                cute.copy(tiled_s2r_K, tSsK[None, None, k], tSrK_v[None, None, k])
                cute.gemm(tiled_mma, acc_S, tSrQ[None, None, k], tSrK[None, None, k], acc_S)

            # ---- mask, local maxima, publish --------------------------------------------
            acc_S_mn = _mn_view(acc_S)
            need_mask = p * PAGE + PAGE > first_masked_pos
            cur = cute.make_rmem_tensor(n_rows, cutlass.Float32)
            for r in cutlass.range_constexpr(n_rows):
                if need_mask:
                    row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                    limit = first_masked_pos + row // self.h - p * PAGE
                    for c in cutlass.range_constexpr(cute.size(acc_S_mn.shape[1])):
                        if tScS_mn[0, c][1] >= limit:
                            acc_S_mn[r, c] = -cutlass.Float32.inf
                cur[r] = _quad_reduce(
                    acc_S_mn[r, None].load().reduce(cute.ReductionOp.MAX, -cutlass.Float32.inf, 0), cute.arch.fmax
                )
                sRed[grp, mtid, r] = cur[r]
            cute.arch.barrier()  # B: both halves' maxima visible

            # ---- online softmax with the full-row max; P -> sP ---------------------------
            for r in cutlass.range_constexpr(n_rows):
                new_max = cute.arch.fmax(row_max[r], cute.arch.fmax(cur[r], sRed[1 - grp, mtid, r]))
                safe_max = 0.0 if new_max == -cutlass.Float32.inf else new_max
                row_vals = acc_S_mn[r, None].load()
                probs = cute.math.exp2(row_vals * scale_log2 - safe_max * scale_log2, fastmath=True)
                corr = cute.math.exp2(row_max[r] * scale_log2 - safe_max * scale_log2, fastmath=True)
                row_sum[r] = row_sum[r] * corr + probs.reduce(cute.ReductionOp.ADD, cutlass.Float32.zero, 0)
                row_max[r] = new_max
                acc_O_mn[r, None] = acc_O_mn[r, None].load() * corr
                acc_S_mn[r, None] = probs
            rP = cute.make_fragment_like(acc_S, bf16)
            rP.store(acc_S.load().to(bf16))
            cute.copy(r2s_P, r2s_P_thr.retile(rP), tPsP)
            cute.arch.barrier()  # C: the full 64 x 64 P is in shared memory

            # ---- O_g += P V_g ---------------------------------------------------------------
            tOrV = thr_mma.make_fragment_B(thr_mma.partition_B(sVt_g))
            tOsV = s2r_V.partition_S(sVt_g)
            tOrV_v = s2r_V.retile(tOrV)
            for k in cutlass.range_constexpr(cute.size(tOsP.shape[2])):
                cute.copy(tiled_s2r_A, tOsP[None, None, k], tOrP_v[None, None, k])
                cute.copy(tiled_s2r_V, tOsV[None, None, k], tOrV_v[None, None, k])
                cute.gemm(tiled_mma, acc_O, tOrP[None, None, k], tOrV[None, None, k], acc_O)

        # ---- epilogue: full row sums from both halves ----------------------------------------
        cute.arch.cp_async_wait_group(0)  # an empty split still issued the Q copy
        cute.arch.barrier()  # every warp is past its last read of sRed
        for r in cutlass.range_constexpr(n_rows):
            sRed[grp, mtid, r] = _quad_reduce(row_sum[r], lambda x, y: x + y)
        cute.arch.barrier()
        for r in cutlass.range_constexpr(n_rows):
            total = sRed[0, mtid, r] + sRed[1, mtid, r]
            empty = total == 0.0
            inv = 0.0 if empty else cute.arch.rcp_approx(total)
            acc_O_mn[r, None] = acc_O_mn[r, None].load() * inv
            if grp == 0 and mtid % 4 == 0:
                row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                lse = -cutlass.Float32.inf
                if not empty:
                    lse = (row_max[r] * scale_log2 + cute.math.log2(total, fastmath=True)) * LN_2
                if cutlass.const_expr(self.direct):
                    if row < self.rows:
                        mLp[bi, row % self.h, row // self.h] = lse
                else:
                    mLp[split, bi, row] = lse
        if cutlass.const_expr(self.direct):
            rO = cute.make_fragment_like(acc_O, bf16)
            rO.store(acc_O.load().to(bf16))
            rO_mn = _mn_view(rO)
            # rows past s*h do not exist in out: store row by row under a predicate
            gO = cute.local_tile(mOp[bi, None, None], (BLOCK_M, D_V // 2), (m_block, grp))
            tOgO_mn = _mn_view(thr_mma.partition_C(gO))
            for r in cutlass.range_constexpr(n_rows):
                if m_block * BLOCK_M + tScS_mn[r, 0][0] < self.rows:
                    cute.autovec_copy(rO_mn[r, None], tOgO_mn[r, None])
        else:
            gO = cute.local_tile(mOp[split, bi, None, None], (BLOCK_M, D_V // 2), (m_block, grp))
            cute.autovec_copy(acc_O, thr_mma.partition_C(gO))
