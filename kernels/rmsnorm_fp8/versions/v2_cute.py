"""v2_cute: v1_cute with the weight loaded beside x, before the row's reduction.

v1_cute reads its 16-byte weight vectors only after the sum of squares and the CTA barrier, so a
CTA waits for memory twice in a row: x from DRAM, then (after the barrier) the weight from L2.
Here each thread issues its x and weight loads together at the start (the weight kept as bf16: 4
registers per vector), so the weight's L2 latency hides under x's DRAM latency and the second phase
is arithmetic, shuffles and stores only.

Prediction (before its first GPU run): decode (t=128, one wave, latency-bound) 10-20% faster than
v1_cute (one L2 round trip of ~1 us out of a few microseconds); prefill within 2% of v1_cute (many
CTAs per SM already overlap one CTA's weight wait with another's x loads; the extra 28 registers per
thread may cost a CTA per SM, which bandwidth does not need).
"""

from __future__ import annotations

import math
from typing import Any

LANGUAGE = "cute-dsl"
PARENT = "v1_cute"
DESCRIPTION = "v1_cute with the weight vectors loaded beside x before the reduction (one memory wait per CTA)"
FEATURES = ("row-in-registers", "compile-once-dynamic-sizes", "half-warp-group-amax", "prefetch-weight-with-input")
CONFIG: dict[str, Any] = {"threads": 128}

GROUP, VEC, FP8_MAX, AMAX_FLOOR = 128, 8, 448.0, 1e-10

try:
    import cutlass
    import cutlass.cute as cute
except ImportError:  # pragma: no cover - depends on the machine
    cutlass = cute = None

if cute is not None:
    import cuda.bindings.driver as cuda

    class RowQuantPrefetch:
        """v1_cute's kernel with the weight loads issued with x's."""

        def __init__(self, d: int, threads: int) -> None:
            self.d, self.threads = d, threads
            self.nv = d // VEC  # 16-byte vectors per row
            self.k = math.ceil(self.nv / threads)  # vectors per thread
            self.warps = threads // 32

        @cute.jit
        def __call__(self, x_ptr: cute.Pointer, w_ptr: cute.Pointer, q_ptr: cute.Pointer, s_ptr: cute.Pointer,
                     t: cutlass.Int32, eps: cutlass.Float32, stream: cuda.CUstream):
            mX = cute.make_tensor(x_ptr, cute.make_ordered_layout((t, self.d), order=(1, 0)))
            mW = cute.make_tensor(w_ptr, cute.make_layout((self.d,)))
            mQ = cute.make_tensor(q_ptr, cute.make_ordered_layout((t, self.d), order=(1, 0)))
            mS = cute.make_tensor(s_ptr, cute.make_ordered_layout((t, self.d // GROUP), order=(1, 0)))
            self.kernel(mX, mW, mQ, mS, eps).launch(grid=(t, 1, 1), block=(self.threads, 1, 1), stream=stream)

        @cute.kernel
        def kernel(self, mX: cute.Tensor, mW: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor, eps: cutlass.Float32):
            tidx, _, _ = cute.arch.thread_idx()
            row, _, _ = cute.arch.block_idx()
            lane = tidx % 32
            warp = tidx // 32
            smem = cutlass.utils.SmemAllocator()
            red = smem.allocate_tensor(cutlass.Float32, cute.make_layout((self.warps,)), byte_alignment=16)

            xrow = mX[row, None]
            xs = []
            ws = []
            ss = cutlass.Float32(0.0)
            for k in cutlass.range_constexpr(self.k):
                v = tidx + k * self.threads
                vc = cutlass.min(v, self.nv - 1)  # past the end: reread the last vector, count nothing
                frag = cute.make_rmem_tensor(VEC, cutlass.BFloat16)
                cute.autovec_copy(cute.local_tile(xrow, (VEC,), (vc,)), frag)
                wf = cute.make_rmem_tensor(VEC, cutlass.BFloat16)
                cute.autovec_copy(cute.local_tile(mW, (VEC,), (vc,)), wf)
                ws.append(wf)
                xv = frag.load().to(cutlass.Float32)
                part = (xv * xv).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
                if cutlass.const_expr(self.nv % self.threads != 0):
                    part = cutlass.select_(v < self.nv, part, cutlass.Float32(0.0))
                ss = ss + part
                xs.append(xv)
            ss = cute.arch.warp_reduction_sum(ss)
            if lane == 0:
                red[warp] = ss
            cute.arch.sync_threads()
            total = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(self.warps):
                total = total + red[i]
            r = cute.math.rsqrt(total * (1.0 / self.d) + eps)

            qrow = mQ[row, None]
            for k in cutlass.range_constexpr(self.k):
                v = tidx + k * self.threads
                y = xs[k] * r * ws[k].load().to(cutlass.Float32)
                amax = cute.math.abs(y).reduce(cute.ReductionOp.MAX, cutlass.Float32(0.0), 0)
                amax = cute.arch.warp_reduction_max(amax, threads_in_group=16)
                amax = cute.arch.fmax(amax, cutlass.Float32(AMAX_FLOOR))
                qf = cute.make_rmem_tensor(VEC, cutlass.Float8E4M3FN)
                qf.store((y * (FP8_MAX / amax)).to(cutlass.Float8E4M3FN))
                if v < self.nv:
                    cute.autovec_copy(qf, cute.local_tile(qrow, (VEC,), (v,)))
                    if lane % 16 == 0:
                        mS[row, v // 16] = amax * (1.0 / FP8_MAX)


from kforge_kernels.rmsnorm_fp8.cute.host import version_functions  # noqa: E402

supports, prepare, run = version_functions("v2_cute", lambda: RowQuantPrefetch, CONFIG)
