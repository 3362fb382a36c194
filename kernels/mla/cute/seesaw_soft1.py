"""v25_cute: the seesaw pair with warpgroup 1's softmax moved ahead of its P V wgmmas.

The timeline probe (``_cute_trace``, docs/kernels/mla.md run 9) showed where v19_cute's pair
loses its time on the H200: the two S GEMMs keep the tensor pipe ~80% busy, but the four P V
GEMMs take ~3,700 cycles for ~2,050 cycles of work.  The chain that sets it is WG1's: once S_B
is done and P_A has arrived, WG1 rescales O_R and *issues* P_A V_AR -- and that issue returns
only ~600 cycles later, when WG0's P_A V_AL (queued just before) has drained -- and only then runs
page B's softmax (~900 cycles) that both P_B V GEMMs wait for.  The pipe idles ~700 cycles per
pair before P_B V.

Here WG1, once it has m0 (barrier S0, as before), runs page B's softmax *first* and publishes
P_B and m1 at once; then it brings O_R to m1 in one rescale (``e(m - m0) e(m0 - m1)``), reads
P_A back from shared memory into registers scaled by ``e(m0 - m1)`` (so P_A and O_R share the
max m1 and no second rescale of O_R sits between its two GEMMs), and queues P_A V_AR and
P_B V_BR back to back as rs-wgmmas, page A's first so its stage is released first.  WG0 is
unchanged.  Algebra: ``O_R e(m - m1) + (P_A e(m0 - m1)) V_AR + P_B V_BR`` is the same sum
(tests/test_seesaw_algebra.py::test_softmax_first_wg1_equals_seesaw).  P_A is rounded to bf16
once more after its scale (|relative error| <= 2^-9, as for every P).

Prediction (before the H200 run): pair period -10 to -15%, so spec 936 -> 830-870 us and
decode 75.5 -> 67-71 us.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairBf16


class MlaSplitSm90SeesawSoftFirst(MlaSplitSm90SeesawPairBf16):
    """v25_cute: v23_cute (split pairs merged over DSMEM in bf16) with WG1's softmax before its P V."""

    wg1_softmax_first = True

    @cute.jit
    def _wg1_softmax_first(self, kv_pipe, pv_rs, acc_S, acc_O, tPsP, tOrV, tScS_mn, frag_layout, sh, m_run, row_sum,
                           scale, s_shape, pa, has_b, ph, first_masked_pos, m_block, scale_log2, mSem, ctid, c, k):
        """WG1's pair after ``_adopt_max`` took m0 (``scale`` = e(m - m0)): see the module docstring."""
        f32 = cutlass.Float32
        n_rows = cute.size(scale)
        to_m0 = cute.make_rmem_tensor(n_rows, f32)
        for r in cutlass.range_constexpr(n_rows):
            to_m0[r] = scale[r]
        rPb = self._softmax_b(acc_S, tScS_mn, tPsP, sh, pa, has_b, first_masked_pos, m_block, scale_log2, m_run,
                              row_sum, scale, c, mSem, ctid, k)
        self._ev(mSem, ctid, c, k, 5)  # P_B and m1 published
        # scale = e(m0 - m1) now: O_R goes to m1 in one pass, P_A (relative to m0) with it
        for r in cutlass.range_constexpr(n_rows):
            to_m0[r] = to_m0[r] * scale[r]
        self._rescale(acc_O, to_m0)
        rPa = cute.make_fragment_like(acc_S, cutlass.BFloat16)
        cute.autovec_copy(tPsP[None, None, None, 0], rPa)
        pa_f = cute.make_rmem_tensor(s_shape, f32)
        pa_f.store(rPa.load().to(f32))
        self._rescale(pa_f, scale)
        rPa = self._bf16(pa_f)
        self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPa, frag_layout), tOrV, 0, ph, 1)
        if has_b:
            self._pv(kv_pipe, pv_rs, acc_O, self._p_operand(rPb, frag_layout), tOrV, 1, ph, 1)
        self._ev(mSem, ctid, c, k, 4)  # P_A V_AR (and P_B V_BR) issued
        if has_b:
            warpgroup.wait_group(1)
        else:
            warpgroup.wait_group(0)
        self._release(kv_pipe, 0, ph)
        self._ev(mSem, ctid, c, k, 6)  # P_A V_AR done
        if has_b:
            warpgroup.wait_group(0)
            self._release(kv_pipe, 1, ph)
