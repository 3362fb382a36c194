"""CuTe DSL MLA decode kernel, sm80-style (mma.sync bf16 + cp.async), one split of the KV range.

Work decomposition (why): MLA has ONE shared latent KV head, so every query head of a sequence
reads the same pages.  We fold the ``s*h`` query rows of a sequence into one M dimension
(row ``r`` -> draft index ``r // h``, head ``r % h``) and give each CTA 64 such rows, so one
64x576 KV page in shared memory feeds a 64x64x576 (QK^T) and a 64x512x64 (PV) tensor-core GEMM.
V is the first 512 columns of the same page, so K and V share one shared-memory buffer.

Threads: 8 warps = 2 "column groups" of 4 warps.  Both groups compute the same S = Q K^T tile
(4 warps x 16 rows) and the same online softmax, so each group keeps P in registers and uses it
directly as the A operand of its half of O = P V (64 x 256 columns per group, 128 fp32
accumulators per thread).  The duplicated QK^T costs ~53% extra tensor work; it buys a kernel
with no cross-warp softmax exchange (v2's job).

Each CTA writes a partial result (O normalised by its own row sum, fp32, and its natural-log
lse) for its KV split; ``_cute_combine`` merges the splits and writes ``out``/``lse``.
"""

from __future__ import annotations

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync, warp

D_QK = 576
D_V = 512
PAGE = 64
BLOCK_M = 64
LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453


def _mn_view(acc: cute.Tensor) -> cute.Tensor:
    """View an mma.sync accumulator ((2,2), MMA_M, MMA_N) as (rows, cols) of this thread."""
    lay = cute.make_layout(acc.layout.shape)
    mn = cute.make_layout(
        ((lay.shape[0][1], lay.shape[1]), (lay.shape[0][0], lay.shape[2])),
        stride=((lay.stride[0][1], lay.stride[1]), (lay.stride[0][0], lay.stride[2])),
    )
    return cute.make_tensor(acc.iterator, cute.composition(acc.layout, mn))


def _quad_reduce(val, op):
    """Reduce over the 4 lanes of an mma quad (they hold the same rows)."""
    val = op(val, cute.arch.shuffle_sync_bfly(val, offset=2, mask=-1, mask_and_clamp=31))
    val = op(val, cute.arch.shuffle_sync_bfly(val, offset=1, mask=-1, mask_and_clamp=31))
    return val


class MlaSplitSm80:
    """Partial MLA attention over one KV split for 64 folded query rows per CTA."""

    def __init__(self, s: int, h: int, stages: int = 2, direct: bool = False):
        self.s, self.h = s, h
        # direct=True (single split only): write bf16 out and lse[b,h,s] instead of partials
        self.direct = direct
        self.rows = s * h
        self.m_blocks = math.ceil(self.rows / BLOCK_M)
        self.rows_pad = self.m_blocks * BLOCK_M
        self.stages = stages
        self.threads = 256

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
        mOp = cute.make_tensor(
            op_ptr, cute.make_ordered_layout((splits, b, self.rows_pad, D_V), order=(3, 2, 1, 0))
        )
        mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((splits, b, self.rows_pad), order=(2, 1, 0)))

        # 128B-swizzled (8 x 64) atoms: conflict-free cp.async stores and ldmatrix loads.
        atom = cute.make_composed_layout(
            cute.make_swizzle(3, 3, 3), 0, cute.make_layout((8, 64), stride=(64, 1))
        )
        sQ_layout = cute.tile_to_shape(atom, (BLOCK_M, D_QK), (0, 1))
        sKV_layout = cute.tile_to_shape(atom, (PAGE, D_QK, self.stages), (0, 1, 2))

        @cute.struct
        class Smem:
            sQ: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sQ_layout)], 1024]
            sKV: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sKV_layout)], 1024]

        g2s = cute.make_copy_atom(
            cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), bf16, num_bits_per_copy=128
        )
        # 256 threads, 8 per 64-column row segment, 8 bf16 per thread-copy.
        tiled_g2s = cute.make_tiled_copy_tv(
            g2s, cute.make_layout((self.threads // 8, 8), stride=(8, 1)), cute.make_layout((1, 8))
        )
        # One warpgroup-sized tiled MMA (4 warps stacked in M); both column groups use it.
        tiled_mma = cute.make_tiled_mma(
            warp.MmaF16BF16Op(bf16, cutlass.Float32, (16, 8, 16)), (4, 1, 1), permutation_mnk=(64, 16, 16)
        )
        self.kernel(
            mQ, mKV, mBT, mLens, mOp, mLp, scale_log2, sQ_layout, sKV_layout, tiled_g2s, tiled_mma, Smem
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
        tiled_g2s: cute.TiledCopy,
        tiled_mma: cute.TiledMma,
        Smem: cutlass.Constexpr,
    ):
        bf16 = cutlass.BFloat16
        tidx, _, _ = cute.arch.thread_idx()
        m_block, bi, split = cute.arch.block_idx()
        splits = mOp.shape[0]
        grp = tidx // 128  # column group: O columns [256*grp, 256*grp + 256)
        mtid = tidx % 128

        t = mLens[bi]
        n_pages = (t + PAGE - 1) // PAGE
        chunk = (n_pages + splits - 1) // splits
        p_begin = split * chunk
        p_end = cutlass.min(p_begin + chunk, n_pages)
        first_masked_pos = t - self.s + 1  # row with draft index i masks pos > t - s + i

        smem = cutlass.utils.SmemAllocator()
        st = smem.allocate(Smem)
        sQ = st.sQ.get_tensor(sQ_layout)
        sKV = st.sKV.get_tensor(sKV_layout)

        # ---- global -> shared copies -----------------------------------------------------
        thr_g2s = tiled_g2s.get_slice(tidx)
        gQ = cute.local_tile(mQ[bi, None, None], (BLOCK_M, D_QK), (m_block, 0))
        tQgQ = thr_g2s.partition_S(gQ)
        tQsQ = thr_g2s.partition_D(sQ)
        cQ = cute.local_tile(cute.make_identity_tensor((self.rows_pad, D_QK)), (BLOCK_M, D_QK), (m_block, 0))
        tQcQ = thr_g2s.partition_S(cQ)
        for m in cutlass.range_constexpr(cute.size(tQsQ.shape[1])):
            # rows past s*h (only when s*h % 64 != 0) are never loaded; their results are dropped
            if tQcQ[0, m, 0][0] < self.rows:
                cute.copy(tiled_g2s, tQgQ[None, m, None], tQsQ[None, m, None])

        tKVsKV = thr_g2s.partition_D(sKV)  # (CPY, CPY_N, CPY_K, stage)

        # ---- MMA partitions --------------------------------------------------------------
        thr_mma = tiled_mma.get_slice(mtid)
        s2r_A = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), bf16)
        s2r_Vt = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), bf16)
        tiled_s2r_K = cute.make_tiled_copy_B(s2r_A, tiled_mma)
        tiled_s2r_V = cute.make_tiled_copy_B(s2r_Vt, tiled_mma)
        tiled_s2r_Q = cute.make_tiled_copy_A(s2r_A, tiled_mma)
        s2r_Q = tiled_s2r_Q.get_slice(mtid)
        s2r_K = tiled_s2r_K.get_slice(mtid)
        s2r_V = tiled_s2r_V.get_slice(mtid)

        tSrQ = thr_mma.make_fragment_A(thr_mma.partition_A(sQ))
        tSsQ = s2r_Q.partition_S(sQ)
        tSrQ_v = s2r_Q.retile(tSrQ)

        acc_O = cute.make_rmem_tensor(thr_mma.partition_shape_C((BLOCK_M, D_V // 2)), cutlass.Float32)
        acc_O.fill(0.0)
        acc_O_mn = _mn_view(acc_O)
        n_rows = cute.size(acc_O_mn.shape[0])
        row_max = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        row_sum = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        row_max.fill(-cutlass.Float32.inf)
        row_sum.fill(0.0)

        cS = cute.make_identity_tensor((BLOCK_M, PAGE))
        tScS_mn = _mn_view(thr_mma.partition_C(cS))

        # ---- prologue: first page --------------------------------------------------------
        if p_begin < p_end:
            gKV0 = mKV[mBT[bi, p_begin], None, None]
            cute.copy(tiled_g2s, thr_g2s.partition_S(gKV0), tKVsKV[None, None, None, 0])
        cute.arch.cp_async_commit_group()

        for p in range(p_begin, p_end):
            stage = (p - p_begin) % self.stages
            if p + 1 < p_end:
                gKVn = mKV[mBT[bi, p + 1], None, None]
                cute.copy(
                    tiled_g2s, thr_g2s.partition_S(gKVn), tKVsKV[None, None, None, (stage + 1) % self.stages]
                )
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(1)
            cute.arch.barrier()

            sK = sKV[None, None, stage]
            # transposed view of V = first 512 columns of the page: (512, 64), this group's half
            sVt = cute.composition(sK, cute.make_layout((D_V, PAGE), stride=(PAGE, 1)))
            sVt_g = cute.local_tile(sVt, (D_V // 2, PAGE), (grp, 0))

            # ---- S = Q K^T ---------------------------------------------------------------
            tSrK = thr_mma.make_fragment_B(thr_mma.partition_B(sK))
            tSsK = s2r_K.partition_S(sK)
            tSrK_v = s2r_K.retile(tSrK)
            acc_S = cute.make_rmem_tensor(thr_mma.partition_shape_C((BLOCK_M, PAGE)), cutlass.Float32)
            acc_S.fill(0.0)
            n_k = cute.size(tSsQ.shape[2])
            for k in cutlass.range_constexpr(n_k):
                cute.copy(tiled_s2r_Q, tSsQ[None, None, k], tSrQ_v[None, None, k])
                cute.copy(tiled_s2r_K, tSsK[None, None, k], tSrK_v[None, None, k])
                cute.gemm(tiled_mma, acc_S, tSrQ[None, None, k], tSrK[None, None, k], acc_S)

            # ---- mask + online softmax -------------------------------------------------------
            acc_S_mn = _mn_view(acc_S)
            need_mask = p * PAGE + PAGE > first_masked_pos
            for r in cutlass.range_constexpr(n_rows):
                if need_mask:
                    row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                    limit = first_masked_pos + row // self.h - p * PAGE  # first masked column
                    for c in cutlass.range_constexpr(cute.size(acc_S_mn.shape[1])):
                        if tScS_mn[0, c][1] >= limit:
                            acc_S_mn[r, c] = -cutlass.Float32.inf
                row_vals = acc_S_mn[r, None].load()
                cur = _quad_reduce(row_vals.reduce(cute.ReductionOp.MAX, -cutlass.Float32.inf, 0), cute.arch.fmax)
                new_max = cute.arch.fmax(row_max[r], cur)
                # a row may see no key of this page (causal window) -> keep exp() finite
                safe_max = 0.0 if new_max == -cutlass.Float32.inf else new_max
                probs = cute.math.exp2(row_vals * scale_log2 - safe_max * scale_log2, fastmath=True)
                corr = cute.math.exp2(row_max[r] * scale_log2 - safe_max * scale_log2, fastmath=True)
                row_sum[r] = row_sum[r] * corr + probs.reduce(cute.ReductionOp.ADD, cutlass.Float32.zero, 0)
                row_max[r] = new_max
                acc_O_mn[r, None] = acc_O_mn[r, None].load() * corr
                acc_S_mn[r, None] = probs

            # ---- O += P V (P stays in registers: C layout of 2 n8 tiles == A layout of k16)
            rP = cute.make_fragment_like(acc_S, cutlass.BFloat16)
            rP.store(acc_S.load().to(cutlass.BFloat16))
            div = cute.logical_divide(rP.layout, (None, None, 2))
            tOrP = cute.make_tensor(
                rP.iterator,
                cute.make_layout(
                    ((div.shape[0], div.shape[2][0]), div.shape[1], div.shape[2][1]),
                    stride=((div.stride[0], div.stride[2][0]), div.stride[1], div.stride[2][1]),
                ),
            )
            tOrV = thr_mma.make_fragment_B(thr_mma.partition_B(sVt_g))
            tOsV = s2r_V.partition_S(sVt_g)
            tOrV_v = s2r_V.retile(tOrV)
            for k in cutlass.range_constexpr(cute.size(tOrP.shape[2])):
                cute.copy(tiled_s2r_V, tOsV[None, None, k], tOrV_v[None, None, k])
                cute.gemm(tiled_mma, acc_O, tOrP[None, None, k], tOrV[None, None, k], acc_O)
            # every warp must be done with this stage before it is refilled
            cute.arch.barrier()

        # ---- epilogue: normalise by the split's row sum, write partial O and lse ----------
        cute.arch.cp_async_wait_group(0)  # an empty split still issued the Q copy
        for r in cutlass.range_constexpr(n_rows):
            total = _quad_reduce(row_sum[r], lambda x, y: x + y)
            empty = total == 0.0
            inv = 0.0 if empty else cute.arch.rcp_approx(total)
            acc_O_mn[r, None] = acc_O_mn[r, None].load() * inv
            if grp == 0 and mtid % 4 == 0:
                row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                lse = -cutlass.Float32.inf
                if not empty:
                    lse = (row_max[r] * scale_log2 + cute.math.log2(total, fastmath=True)) * LN_2
                mLp[split, bi, row] = lse
        gO = cute.local_tile(mOp[split, bi, None, None], (BLOCK_M, D_V // 2), (m_block, grp))
        tOgO = thr_mma.partition_C(gO)
        cute.autovec_copy(acc_O, tOgO)
