"""The timeline probe's device side: SM-clock stamps a ``trace`` kind writes (see ``_cute_trace``).

A kind with ``trace = True`` gets the counter argument (``mSem``, unused by the non-fused kinds)
as an int32 buffer of ``TRACE_PER_CTA`` words per CTA; every other kind compiles these calls to
nothing (``const_expr``), so their PTX is unchanged.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.trace_layout import (TRACE_EVENTS, TRACE_HDR, TRACE_PAGES, TRACE_PAIRS, TRACE_PER_CTA,
                                                   TRACE_PROD)


class TraceProbe:
    """Mixin of the sm_90 split kernel: the probe's stamps."""

    #: stamp the SM clock at schedule points into the counter argument (``_cute_trace``)
    trace = False
    m_blocks: int
    looping: bool  # MlaSplitSm90's: the persistent loop runs

    def _record(self, mSem):
        """This CTA's ``TRACE_PER_CTA`` words of the probe buffer (the counter argument)."""
        m_block, bi, split = cute.arch.block_idx()
        _, b, _ = cute.arch.grid_dim()
        cta = (split * b + bi) * self.m_blocks + m_block
        return cute.make_tensor(mSem.iterator + cta * TRACE_PER_CTA, cute.make_layout(TRACE_PER_CTA))

    @cute.jit
    def _stamp(self, mSem, slot, ns: cutlass.Constexpr = False):
        """Timeline probe (``trace`` kinds only): this SM's clock (or, ``ns``, the global timer's low word)
        into word ``slot`` of this CTA's record."""
        if cutlass.const_expr(self.trace):
            if cutlass.const_expr(ns):
                self._record(mSem)[slot] = cute.arch.globaltimer_lo()
            else:
                self._record(mSem)[slot] = cute.arch.clock()

    def _first_warp(self, ctid):
        """The warpgroup's first warp (``ctid`` = thread index in the warpgroup).  In the persistent loop the
        condition goes through ``make_warp_uniform``: ptxas serialises every wgmma of a loop when it cannot see
        that a branch before more wgmma is warp-uniform (knowledge: wgmma-serialized-by-divergent-branch)."""
        if cutlass.const_expr(self.looping):
            return cute.arch.make_warp_uniform(ctid // 32) == 0
        return ctid < 32

    @cute.jit
    def _slot_free(self, mSem, q, last: cutlass.Constexpr):
        """Timeline probe (producer): when page q of the split had its first (``last`` False) or last slot free,
        for the first TRACE_PAGES pages."""
        if cutlass.const_expr(self.trace):
            if q < TRACE_PAGES:
                self._stamp(mSem, TRACE_PROD + 2 * q + last)

    @cute.jit
    def _hdr(self, mSem, ctid, slot, ns: cutlass.Constexpr = False):
        """Timeline probe: header word ``slot`` (the warpgroup's first warp; see ``_ev``).

        ``ns``: the global nanosecond timer instead of the SM clock -- next to the clock words it
        gives the SM clock the kernel actually ran at (cycles / ns), which NVML's samples between
        kernels can miss on a power-capped board.
        """
        if cutlass.const_expr(self.trace):
            if self._first_warp(ctid):
                self._stamp(mSem, slot, ns)

    @cute.jit
    def _ev(self, mSem, ctid, c, k, e: cutlass.Constexpr):
        """Timeline probe: event ``e`` of pair ``k`` of warpgroup ``c`` (first TRACE_PAIRS pairs).

        The whole first warp of the warpgroup stores (same word, one transaction), never one
        thread: a named barrier is an *aligned* instruction, and LLVM may duplicate one that follows
        a stamp into both sides of the stamp's branch (it did, with stamps on both sides of
        ``barrier_arrive``: thread 0 and lanes 1-31 then arrived at different instructions and the
        kernel hung on the H200).  A warp-uniform condition keeps every warp on one path.
        """
        if cutlass.const_expr(self.trace):
            if self._first_warp(ctid):
                if k < TRACE_PAIRS:
                    self._stamp(mSem, TRACE_HDR + (c * TRACE_PAIRS + k) * TRACE_EVENTS + e)
