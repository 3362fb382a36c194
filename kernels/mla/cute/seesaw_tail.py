"""v54_cute: v35_cute's kernel with the last wave of a one-split grid cut into balanced pieces.

v35_cute's spec grid is 1,024 tiles on 132 SMs: seven full waves and a last one of 100 tiles, during
which 32 SMs idle for a whole tile (~105 us of ~868).  ``_cute_tail_plan`` keeps the full waves and
cuts the last wave's pages into one bin of equal cost per SM; here are the two grids that run it:

* the **direct grid** (``direct``): CTA ``x`` runs tile ``x`` whole (m_block ``x % m_blocks``,
  sequence ``x // m_blocks``) and writes the final O and lse, as v35_cute does.  Its CTAs trigger the
  dependent launch as soon as their barriers are set up;
* the **tail grid** (not ``direct``, launched as a programmatic dependent of the direct grid): CTA
  ``x`` reads item ``x`` of the work table (m_block, sequence, page range, slot, parts), runs those
  pages, stores its fp32 partial O and lse in slot ``slot`` of its tile, then counts itself in on the
  tile's counter; the last of the tile's ``parts`` pieces merges them into the final O and lse
  (v10_cute's fused merge, ``_cute_seesaw_fused``) and sets the counter back to 0 for the next call.
  Since the tail grid launches early, its CTAs take SMs as the direct grid's last CTAs leave.  Its
  last CTA ends with ``griddepcontrol.wait``, so the tail grid never completes before the direct
  grid and the stream's next work (the harness's end event) sees both.

The counters and the table share the counter argument: ``b * m_blocks`` counters, then the items.
The partials are compact: only the tail's sequences have slots, so their tensor is laid out with
the sequence outermost and the host passes its base shifted back by the sequences before the tail
(never dereferenced).  Decode (paired splits) runs v35_cute's kernel unchanged.

Also here: v55_cute's lean merge (``MlaSplitSm90SeesawPairTailLean``), v56_cute's merged O through a TMA store
(``MlaSplitSm90SeesawPairTailTmaOut``) and three probe-only twins of the tail grid
for ``_cute_tail_probe`` (``...NoMerge``, ``...NoStore``: the merge, then also the partial O store, cut out;
``...NoOut``: v55_cute's merge without its bf16 O stores).
Run 20 measured with them that a piece's fp32 partial store costs ~3.7 us and its count-in and merge ~10 us, ~6 of
them the bf16 O written from registers (the TMA store gives back 2-3.7).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.seesaw_fused import LOG2_E, MlaSplitSm90SeesawFused
from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla.cute.sm90_epilogue import SplitEpilogue
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, D_V, LN_2, _mn_view
from kforge_kernels.mla.cute.tail_plan import ITEM_WORDS, MAX_PARTS

#: the end page a direct-grid CTA asks for: clamped to its sequence's pages
ALL_PAGES = 1 << 30


class MlaSplitSm90SeesawPairTail(MlaSplitSm90SeesawPairC3Early):
    """v54_cute: v35_cute whose one-split shapes run their full waves whole and their last wave in pieces."""

    _merge_splits = MlaSplitSm90SeesawFused._merge_splits
    _store_merged = MlaSplitSm90SeesawFused._store_merged
    _count_in = MlaSplitSm90SeesawFused._count_in

    @property
    def work_table(self) -> bool:  # type: ignore[override]
        return not self.pair  # a merging pair (decode's splits) is v35_cute's kernel

    @property
    def fused_combine(self) -> bool:  # type: ignore[override]
        return self.work_table and not self.direct

    @property
    def pdl_trigger(self) -> bool:  # type: ignore[override]
        return self.work_table and self.direct

    def _work_item(self, x, mLens, mSem):
        """(trace time) CTA ``x``'s (m_block, sequence, slot, first page, end page)."""
        if self.direct:
            return x % self.m_blocks, x // self.m_blocks, 0, 0, ALL_PAGES
        item = cute.make_tensor(mSem.iterator + (cute.size(mLens) * self.m_blocks + x * ITEM_WORDS),
                                cute.make_layout(ITEM_WORDS))
        self._tail_parts = item[5]  # read by _merge_count
        return item[0], item[1], item[4], item[2], item[3]

    def _merge_count(self, mLp):
        """The pieces of this CTA's tile (from its work item)."""
        return self._tail_parts

    def _table_partials(self, op_ptr, lp_ptr, b):
        """(trace time) The partials as (slot, sequence, row, dim) and (slot, sequence, row), sequence outermost."""
        mOp = cute.make_tensor(op_ptr, cute.make_ordered_layout((MAX_PARTS, b, self.rows_pad, D_V), order=(2, 3, 1, 0)))
        mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((MAX_PARTS, b, self.rows_pad), order=(1, 2, 0)))
        return mOp, mLp


class MlaSplitSm90SeesawPairTailLean(MlaSplitSm90SeesawPairTail):
    """v55_cute: v54_cute whose tail pieces count in and merge with fewer round trips (``_merge_splits``)."""

    @cute.jit
    def _merge_splits(self, thr_pv, acc_O, tScS_mn, m_run, total, m_block, bi, split, c, ctid, sh,
                      mOp, mLp, mOut, mLse, mSem, scale_log2):
        """v10_cute's fused merge with the latency chain cut short (same arithmetic, same result):

        * counting in: the CTA barrier, then thread 0's acq_rel atomic at GPU scope publishes every consumer
          thread's partial stores (the barrier orders them before the release) -- no fence in each thread;
          in the last piece, that atomic's acquire and the next barrier order the other pieces' partials
          before this CTA's loads (no second fence);
        * the lse of all ``MAX_PARTS`` slots of a row are loaded at once (one round trip per row, predicated
          on the tile's piece count), not in two dependent loops per row (four to six round trips);
        * the other pieces' partials are read in an unrolled loop over the slots.
        """
        f32 = cutlass.Float32
        parts = self._merge_count(mLp)
        n_rows = cute.size(m_run)
        if self._count_in(sh, bi, m_block, c, ctid, mSem, False) == f32(parts - 1):
            acc_O_mn = _mn_view(acc_O)
            lz = cute.make_rmem_tensor((n_rows, MAX_PARTS), f32)
            for r in cutlass.range_constexpr(n_rows):
                row = m_block * BLOCK_M + tScS_mn[r, 0][0]
                for z in cutlass.range_constexpr(MAX_PARTS):
                    lz[r, z] = -cutlass.Float32.inf
                    if z < parts:
                        lz[r, z] = mLp[z, bi, row]
            top = cute.make_rmem_tensor(n_rows, f32)
            inv = cute.make_rmem_tensor(n_rows, f32)
            for r in cutlass.range_constexpr(n_rows):
                # this piece's own lse, as its epilogue stored it in slot ``split``
                lse_own = -cutlass.Float32.inf
                if total[r] != 0.0:
                    lse_own = (m_run[r] * scale_log2 + cute.math.log2(total[r], fastmath=True)) * LN_2
                top[r] = lz[r, 0]
                for z in cutlass.range_constexpr(1, MAX_PARTS):
                    top[r] = cute.arch.fmax(top[r], lz[r, z])
                if top[r] == -cutlass.Float32.inf:
                    top[r] = 0.0
                denom = f32(0.0)
                for z in cutlass.range_constexpr(MAX_PARTS):
                    denom = denom + cute.math.exp2((lz[r, z] - top[r]) * LOG2_E, fastmath=True)
                inv[r] = 0.0 if denom == 0.0 else cute.arch.rcp_approx(denom)
                acc_O_mn[r, None] = acc_O_mn[r, None].load() * (
                    cute.math.exp2((lse_own - top[r]) * LOG2_E, fastmath=True) * inv[r])
            for z in cutlass.range_constexpr(MAX_PARTS):
                if z < parts:
                    if z != split:
                        tOgZ = thr_pv.partition_C(cute.local_tile(mOp[z, bi, None, None], (BLOCK_M, D_V // 2),
                                                                  (m_block, c)))
                        part = cute.make_fragment_like(acc_O, f32)
                        cute.autovec_copy(tOgZ, part)
                        part_mn = _mn_view(part)
                        for r in cutlass.range_constexpr(n_rows):
                            w = cute.math.exp2((lz[r, z] - top[r]) * LOG2_E, fastmath=True) * inv[r]
                            acc_O_mn[r, None] = acc_O_mn[r, None].load() + part_mn[r, None].load() * w
            self._store_merged(thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut, mLse)
            if c == 0 and ctid == 0:
                mSem[bi * self.m_blocks + m_block] = 0  # reset for the next call


class MlaSplitSm90SeesawPairTailTmaOut(MlaSplitSm90SeesawPairTailLean):
    """v56_cute: v55_cute whose last piece writes the merged O through shared memory and one TMA store per
    warpgroup (v28_cute's epilogue, over Q's buffer, which no GEMM reads any more), not from registers."""

    @property
    def merge_via_tma(self) -> bool:  # type: ignore[override]
        return self.fused_combine

    @cute.jit
    def _store_merged(self, thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut, mLse):
        self._store_o_tma(acc_O, thr_pv.partition_C(self._o_store[2][None, None, c]), m_block, bi)
        MlaSplitSm90SeesawFused._store_merged(self, thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut,
                                              mLse, False)


class MlaSplitSm90SeesawPairTailNoMerge(MlaSplitSm90SeesawPairTail):
    """Probe only (``_cute_tail_probe``; its output means nothing): v54_cute's tail grid whose pieces store their
    partials and stop -- no counting in, no merge."""

    computes_output = False

    @property
    def fused_combine(self) -> bool:  # type: ignore[override]
        return False


class MlaSplitSm90SeesawPairTailNoStore(MlaSplitSm90SeesawPairTailNoMerge):
    """Probe only: ``MlaSplitSm90SeesawPairTailNoMerge`` whose pieces store no partial O either (the lse only)."""

    @cute.jit
    def _store_o(self, acc_O, tOgO, tScS_mn, m_block, bi=None):
        # the store stays behind a branch never taken (m_block >= 0) that the compiler cannot rule out: without
        # any use of O it would drop the accumulator's rescaling from the page loop and time less math
        if cutlass.const_expr(self.direct):
            SplitEpilogue._store_o(self, acc_O, tOgO, tScS_mn, m_block, bi)
        elif m_block < 0:
            SplitEpilogue._store_o(self, acc_O, tOgO, tScS_mn, m_block, bi)


class MlaSplitSm90SeesawPairTailNoOut(MlaSplitSm90SeesawPairTailLean):
    """Probe only: v55_cute's tail grid whose last piece counts in and merges but writes the lse only, not the bf16
    O (the O stores stay behind a never-taken branch, as in ``...NoStore``): the merge's output stores apart."""

    computes_output = False

    @cute.jit
    def _store_merged(self, thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut, mLse):
        if m_block < 0:
            MlaSplitSm90SeesawFused._store_merged(self, thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut,
                                                  mLse)
        else:
            MlaSplitSm90SeesawFused._store_merged(self, thr_pv, acc_O, tScS_mn, top, inv, m_block, bi, c, ctid, mOut,
                                                  mLse, False)
