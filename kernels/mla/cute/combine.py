"""CuTe DSL combine step: merge per-split partial (O, lse) into ``out`` (bf16) and ``lse`` (fp32).

One CTA per (folded row, sequence), 128 threads x 4 columns.  Split z carries O_z (already
normalised by its own row sum) and lse_z; the merged result is
``lse = log(sum_z exp(lse_z))`` and ``out = sum_z exp(lse_z - lse) * O_z``.  Splits that saw no
key carry lse_z = -inf and weigh 0.  Folded row r maps to draft index r // h and head r % h.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute

D_V = 512
LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453


class MlaCombine:
    """Merges ``splits`` partial results for ``s*h`` folded rows of each sequence."""

    #: folded rows one CTA merges, threads per CTA, programmatic dependent launch (subclasses change them)
    rows_per_cta = 1
    threads = 128
    pdl = False

    def __init__(self, s: int, h: int, rows_pad: int):
        self.s, self.h, self.rows, self.rows_pad = s, h, s * h, rows_pad

    @cute.jit
    def __call__(
        self,
        op_ptr: cute.Pointer,
        lp_ptr: cute.Pointer,
        out_ptr: cute.Pointer,
        lse_ptr: cute.Pointer,
        b: cutlass.Int32,
        splits: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        mOp = cute.make_tensor(
            op_ptr, cute.make_ordered_layout((splits, b, self.rows_pad, D_V), order=(3, 2, 1, 0))
        )
        mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((splits, b, self.rows_pad), order=(2, 1, 0)))
        mOut = cute.make_tensor(out_ptr, cute.make_ordered_layout((b, self.rows, D_V), order=(2, 1, 0)))
        # lse is [b, h, s]: folded row r = i*h + head lives at head*s + i
        mLse = cute.make_tensor(lse_ptr, cute.make_ordered_layout((b, self.h, self.s), order=(2, 1, 0)))
        grid = ((self.rows + self.rows_per_cta - 1) // self.rows_per_cta, b, 1)
        self.kernel(mOp, mLp, mOut, mLse).launch(grid=grid, block=(self.threads, 1, 1), stream=stream, use_pdl=self.pdl)

    @cute.kernel
    def kernel(self, mOp: cute.Tensor, mLp: cute.Tensor, mOut: cute.Tensor, mLse: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        row, bi, _ = cute.arch.block_idx()
        splits = mOp.shape[0]

        top = -cutlass.Float32.inf
        for z in range(splits):
            top = cute.arch.fmax(top, mLp[z, bi, row])
        safe_top = 0.0 if top == -cutlass.Float32.inf else top
        denom = cutlass.Float32(0.0)
        for z in range(splits):
            denom = denom + cute.math.exp2((mLp[z, bi, row] - safe_top) * LOG2_E, fastmath=True)
        inv = 0.0 if denom == 0.0 else 1.0 / denom

        acc = cute.make_rmem_tensor(4, cutlass.Float32)
        acc.fill(0.0)
        for z in range(splits):
            w = cute.math.exp2((mLp[z, bi, row] - safe_top) * LOG2_E, fastmath=True) * inv
            if w > 0.0:
                src = cute.local_tile(mOp[z, bi, row, None], (4,), (tidx,))
                part = cute.make_rmem_tensor(4, cutlass.Float32)
                cute.autovec_copy(src, part)
                acc.store(acc.load() + part.load() * w)
        res = cute.make_rmem_tensor(4, cutlass.BFloat16)
        res.store(acc.load().to(cutlass.BFloat16))
        cute.autovec_copy(res, cute.local_tile(mOut[bi, row, None], (4,), (tidx,)))
        if tidx == 0:
            mLse[bi, row % self.h, row // self.h] = safe_top + cute.math.log2(denom, fastmath=True) * LN_2
