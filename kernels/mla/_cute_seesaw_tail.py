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
"""

from __future__ import annotations

import cutlass.cute as cute

from kforge_kernels.mla._cute_seesaw_fused import MlaSplitSm90SeesawFused
from kforge_kernels.mla._cute_seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla._cute_sm90_parts import D_V
from kforge_kernels.mla._cute_tail_plan import ITEM_WORDS, MAX_PARTS

#: the end page a direct-grid CTA asks for: clamped to its sequence's pages
ALL_PAGES = 1 << 30


class MlaSplitSm90SeesawPairTail(MlaSplitSm90SeesawPairC3Early):
    """v54_cute: v35_cute whose one-split shapes run their full waves whole and their last wave in pieces."""

    _merge_splits = MlaSplitSm90SeesawFused._merge_splits

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
