"""CuTe DSL combine step for v6_cute: bf16 partials, one pass with each split's loads issued together.

``_cute_combine`` (v1_cute..v5_cute) reads every split's lse, then the max, then the weights, and
only then the fp32 partial rows, one split after the other: a chain of dependent global loads
(9.9 us on the decode trial for 21 MB moved, ~2 TB/s).  Here each split's lse and partial row
are loaded together and merged with a running max (online log-sum-exp), so the loads of a split
depend on nothing computed before them, and the partials are bf16 (half the bytes; the merge
still accumulates in fp32).  Same contract: split z carries O_z normalised by its own row sum
and lse_z (natural log, -inf when it saw no key); folded row r = draft (r // h), head (r % h).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.combine import MlaCombine

D_V = 512
LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453
COLS = 4  # columns per thread: 128 threads x 4 = 512


class MlaCombineOnePass(MlaCombine):
    """Merges ``splits`` bf16 partial results for the ``s*h`` folded rows of each sequence."""

    # views and launch: MlaCombine's (one 128-thread CTA per folded row)

    @cute.kernel
    def kernel(self, mOp: cute.Tensor, mLp: cute.Tensor, mOut: cute.Tensor, mLse: cute.Tensor):
        f32 = cutlass.Float32
        tidx, _, _ = cute.arch.thread_idx()
        row, bi, _ = cute.arch.block_idx()
        splits = mOp.shape[0]

        top = -f32.inf  # running max of the lse_z seen so far
        denom = f32(0.0)  # sum_z exp(lse_z - top)
        acc = cute.make_rmem_tensor(COLS, f32)
        acc.fill(0.0)
        part = cute.make_rmem_tensor(COLS, cutlass.BFloat16)
        for z in cutlass.range(splits, unroll=2):
            lz = mLp[z, bi, row]
            cute.autovec_copy(cute.local_tile(mOp[z, bi, row, None], (COLS,), (tidx,)), part)
            if lz > -f32.inf:  # a split that saw no key weighs 0 (and must not make inf - inf)
                new_top = cute.arch.fmax(top, lz)
                keep = cute.math.exp2((top - new_top) * LOG2_E, fastmath=True)
                w = cute.math.exp2((lz - new_top) * LOG2_E, fastmath=True)
                acc.store(acc.load() * keep + part.load().to(f32) * w)
                denom = denom * keep + w
                top = new_top
        inv = 0.0 if denom == 0.0 else 1.0 / denom
        res = cute.make_rmem_tensor(COLS, cutlass.BFloat16)
        res.store((acc.load() * inv).to(cutlass.BFloat16))
        cute.autovec_copy(res, cute.local_tile(mOut[bi, row, None], (COLS,), (tidx,)))
        if tidx == 0:
            lse = -f32.inf
            if denom > 0.0:
                lse = top + cute.math.log2(denom, fastmath=True) * LN_2
            mLse[bi, row % self.h, row // self.h] = lse
