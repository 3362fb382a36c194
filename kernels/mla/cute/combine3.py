"""CuTe DSL combine step for v12_cute: one warp per folded row, eight rows per CTA, fp32 partials.

``_cute_combine`` launches one 128-thread CTA per (row, sequence) -- 4096 tiny CTAs on the decode
trial, each a chain of dependent loads (lse of every split, then the weights, then the rows), and
measured 9.9 us for 21 MB on the H200 (v9_cute's profile, 12% of decode).  Here a warp merges one
row: each lane owns 16 of the 512 columns as four 16-byte vectors (a warp's load is 512
contiguous bytes), every split's lse and partial are loaded in one pass and merged with a running
max (online log-sum-exp), and a CTA of 8 warps takes 8 rows, so the decode trial launches 512 CTAs.
Same contract as ``_cute_combine``: split z carries O_z normalised by its own row sum and lse_z
(natural log, -inf when it saw no key); folded row r = draft (r // h), head (r % h).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.combine import MlaCombine

D_V = 512
LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453
ROWS = 8  # rows (warps) per CTA
VEC = 4  # fp32 per 16-byte vector
PER_LANE = D_V // (32 * VEC)  # vectors per lane: 4


class MlaCombineWarpRows(MlaCombine):
    """Merges ``splits`` fp32 partial results for the ``s*h`` folded rows of each sequence."""

    rows_per_cta = ROWS
    threads = 32 * ROWS

    @cute.kernel
    def kernel(self, mOp: cute.Tensor, mLp: cute.Tensor, mOut: cute.Tensor, mLse: cute.Tensor):
        if cutlass.const_expr(self.pdl):
            # launched early (programmatic dependent launch): the split grid's partials are
            # complete and visible only after this
            cute.arch.griddepcontrol_wait()
        tidx, _, _ = cute.arch.thread_idx()
        rblock, bi, _ = cute.arch.block_idx()
        lane = tidx % 32
        row = rblock * ROWS + tidx // 32
        splits = mOp.shape[0]
        if row < self.rows:
            top = -cutlass.Float32.inf
            denom = cutlass.Float32(0.0)
            acc = cute.make_rmem_tensor(VEC * PER_LANE, cutlass.Float32)
            acc.fill(0.0)
            part = cute.make_rmem_tensor(VEC * PER_LANE, cutlass.Float32)
            for z in cutlass.range(splits, unroll=2):
                lz = mLp[z, bi, row]
                for j in cutlass.range_constexpr(PER_LANE):
                    cute.autovec_copy(cute.local_tile(mOp[z, bi, row, None], (VEC,), (lane + 32 * j,)),
                                      cute.local_tile(part, (VEC,), (j,)))
                new_top = cute.arch.fmax(top, lz)
                safe = 0.0 if new_top == -cutlass.Float32.inf else new_top
                # a split that saw no key (lz = -inf) weighs 0; the first one rescales nothing
                keep = cute.math.exp2((top - safe) * LOG2_E, fastmath=True)
                w = cute.math.exp2((lz - safe) * LOG2_E, fastmath=True)
                acc.store(acc.load() * keep + part.load() * w)
                denom = denom * keep + w
                top = new_top
            inv = 0.0 if denom == 0.0 else 1.0 / denom
            res = cute.make_rmem_tensor(VEC * PER_LANE, cutlass.BFloat16)
            res.store((acc.load() * inv).to(cutlass.BFloat16))
            for j in cutlass.range_constexpr(PER_LANE):
                cute.autovec_copy(cute.local_tile(res, (VEC,), (j,)),
                                  cute.local_tile(mOut[bi, row, None], (VEC,), (lane + 32 * j,)))
            if lane == 0:
                safe_top = 0.0 if top == -cutlass.Float32.inf else top
                mLse[bi, row % self.h, row // self.h] = safe_top + cute.math.log2(denom, fastmath=True) * LN_2


class MlaCombineWarpRowsPdl(MlaCombineWarpRows):
    """The same combine launched with programmatic dependent launch: its launch overlaps the split grid."""

    pdl = True
