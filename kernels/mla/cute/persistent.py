"""A persistent CTA for the one-split (direct) seesaw kernel: one CTA per SM walks the tiles.

Run 12's probe of v35_cute puts 1.86 us of prologue (Q landing, the first pair's pages) and 2.20 us
of epilogue (normalise, stage O in Q's buffer, one TMA store per warpgroup) into each CTA's 114 us
on spec, where 1024 (row block, sequence) tiles run as 1024 CTAs.  Here the grid is at most
``max_ctas`` CTAs and CTA i takes tiles i, i + grid, ...; the producer runs ahead across tile
boundaries, so the next tile's first pair of pages lands while the consumers finish the epilogue
(its Q follows once the epilogue's stores have read Q's buffer).

What the loop has to keep right (each is a hang or a wrong answer if missed):

* Q's buffer is also O's staging tile: the consumers give Q's pipeline slot back only after the
  epilogue (the storing warp of each warpgroup waits until its bulk store has read the tile, then
  syncs, before its lane 0 arrives), and the producer acquires the slot before it loads the next Q.
  With ``loop_q_early`` (v47_cute) O leaves from registers instead, and each warpgroup gives the slot
  back right after its last S GEMM of the tile (a tile without pages, after its pair loop), so the
  producer loads the next Q first, under this tile's last P V GEMMs and epilogue;
* the KV ring's passes run on across tiles: a tile with an odd page count still passes a page B
  through the ring (the producer loads the tile's last page again; the consumers wait for it and
  give it back without using it), and the consumers' pair parity continues from the previous tile
  (``ph0``);
* O, the running maxima and the row sums start from zero in every tile (``_seesaw_tile``);
* every tile has at least one pair (the spec's sequences are at least s >= 1 tokens long): the
  pair barriers keep a warpgroup from starting the next tile's epilogue (which rewrites the row-sum
  slots) before the other has read this tile's.

The wave tail (1024 tiles on 132 SMs: the last round 76% full) stays: static round-robin tiles
do not balance it.  Traceable (``<kind>_trace``): a CTA's record is rewritten by every tile it runs, so
the probe reads each CTA's last tile -- a steady-state tile whose start follows the previous epilogue,
so its "start -> Q landed" is the Q latency the loop left exposed; the producer's slot stamps are not
written (its loads run ahead across tiles).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync

from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairC3Early
from kforge_kernels.mla.cute.seesaw_stale import MlaSplitSm90SeesawPairStaleRedo
from kforge_kernels.mla.cute.sm90_parts import CONSUMERS, PAGE

#: named barrier (v58_cute): the consumers and the producer's loading warp meet after the stale loop, before the
#: exact loop reads the flags the consumers set (ids 1-11 are taken: 1-6 and 9-11 the pair's, 7-8 the epilogue's
#: BAR_O + c, one per warpgroup's TMA store of O)
BAR_REDO = 12


class MlaSplitSm90SeesawPersistent(MlaSplitSm90SeesawPairC3Early):
    """v35_cute's kernel with one CTA per SM looping over the tiles when the shape runs one split."""

    persistent = True
    #: CTAs of the looping grid: the H200's SM count (one 227 KB CTA fits per SM)
    max_ctas = 132
    #: run only the tiles whose int32 in the counter argument is non-zero, and zero it (v57_cute's redo)
    redo_list = False
    #: after the loop over every tile, loop again over the tiles it flagged, with the exact pair (v58_cute)
    redo_inline = False

    @cute.jit
    def _persistent_cta(self, tidx, wg, warp_idx, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe, kv_pipe, mBT, mLens,
                        qk_mma, pv_mma, rs_mmas, sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2):
        self._check_loopable()
        first, _, _ = cute.arch.block_idx()
        step, _, _ = cute.arch.grid_dim()
        n_tiles = self.m_blocks * cute.size(mLens)
        if wg == 0:
            cute.arch.setmaxregister_decrease(self.regs_producer)
            if warp_idx == 0:
                self._persistent_producer(first, step, n_tiles, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe, kv_pipe,
                                          mBT, mLens, mSem)
        else:
            cute.arch.setmaxregister_increase(self.regs_consumer)
            parts = self._seesaw_parts(qk_mma, pv_mma, rs_mmas, tidx, wg, 0, 0, 0, q_pipe, sQ, sKV, sV, sRed, mOp)
            q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
            passes = cutlass.Int32(0)  # ring passes (page pairs) of the tiles before this one
            if cutlass.const_expr(self.redo_list):
                passes, q_state = self._consume_flagged(parts, first, step, n_tiles, tidx, mLens, q_pipe, kv_pipe, mOp,
                                                        mLp, mOut, mLse, mSem, scale_log2, q_state, passes)
            else:
                for tile in cutlass.range(first, n_tiles, step, unroll=1):
                    passes, q_state = self._consumer_tile(parts, tile, mLens, q_pipe, kv_pipe, mOp, mLp, mOut, mLse,
                                                          mSem, scale_log2, q_state, passes)
                if cutlass.const_expr(self.redo_inline):
                    # the bulk stores of O must have landed before a redo of the same tile stores it again, and
                    # every flag must be written before the barrier lets anyone read them
                    cute.arch.cp_async_bulk_wait_group(0, read=False)
                    cute.arch.barrier(barrier_id=BAR_REDO, number_of_threads=CONSUMERS + 32)
                    self._exact(True)
                    passes, q_state = self._consume_flagged(parts, first, step, n_tiles, tidx, mLens, q_pipe, kv_pipe,
                                                            mOp, mLp, mOut, mLse, mSem, scale_log2, q_state, passes)
                    self._exact(False)

    @cute.jit
    def _consume_flagged(self, parts, first, step, n_tiles, tidx, mLens, q_pipe, kv_pipe, mOp, mLp, mOut, mLse, mSem,
                         scale_log2, q_state, passes):
        """The consumers' loop over this CTA's tiles whose flag (an int32 in the counter argument) is set, each
        zeroed after its tile; returns the passes and the Q state after it."""
        pre = self._flags_ahead(mSem, first, step, n_tiles)
        for tile in cutlass.range(first, n_tiles, step, unroll=1):
            if self._flag_of(mSem, pre, tile, first, step) != 0:  # flagged by a stale-max loop (v57_cute, v58_cute)
                passes, q_state = self._consumer_tile(parts, tile, mLens, q_pipe, kv_pipe, mOp, mLp, mOut, mLse, mSem,
                                                      scale_log2, q_state, passes)
                if tidx == 128:
                    mSem[tile] = 0  # read by every warp that needed it (they passed the tile's barriers)
        return passes, q_state

    @cute.jit
    def _consumer_tile(self, parts, tile, mLens, q_pipe, kv_pipe, mOp, mLp, mOut, mLse, mSem, scale_log2, q_state,
                       passes):
        """The consumers' tile ``tile`` of the loop (``passes``: the ring passes before it); returns the passes
        and the Q state after it (returned, as a state changed inside a helper does not leave a staged branch)."""
        m_block = tile % self.m_blocks
        bi = tile // self.m_blocks
        t = mLens[bi]
        n_pages = (t + PAGE - 1) // PAGE
        self._seesaw_tile(parts, m_block, bi, 0, t, 0, n_pages, n_pages, q_pipe, kv_pipe, mOp, mLp, mOut,
                          mLse, mSem, scale_log2, q_state=q_state, ph0=passes)
        q_state.advance()
        return passes + (n_pages + 1) // 2, q_state

    @cute.jit
    def _flags_ahead(self, mSem, first, step, n_tiles):
        """Lane j's redo flag of this CTA's j-th tile (0 past the last): one load per warp for up to 32 tiles, so
        a loop with nothing flagged waits for memory once, not once per tile."""
        tile = first + cute.arch.lane_idx() * step
        pre = cutlass.Int32(0)
        if tile < n_tiles:
            pre = mSem[tile]
        return pre

    @cute.jit
    def _flag_of(self, mSem, pre, tile, first, step):
        """The redo flag of ``tile`` (warp-uniform): from ``_flags_ahead``'s lanes, or memory past the 32nd tile."""
        i = (tile - first) // step
        flag = cute.arch.shuffle_sync(pre, i)
        if i >= 32:
            flag = mSem[tile]
        return flag

    def _check_loopable(self) -> None:
        """Trace time: the loop supports none of the schedule flags that assume one tile per CTA (and needs the
        TMA-store epilogue, whose O partition, built once in ``_seesaw_parts``, is the same for every tile, unless
        ``loop_q_early`` stores O from registers through a per-tile view)."""
        self._refuse_flags("the persistent loop", {
            "q_reg_blocks": self.q_reg_blocks > 0, "early_issue": self.early_issue,
            "early_release": self.early_release, "cluster": self.cluster > 1,
            "l2_prefetch_pages": self.l2_prefetch_pages > 0, "stagger": self.stagger,
            "fused_combine": self.fused_combine, "tma_store_o off": not self.o_via_tma and not self.loop_q_early,
            "chunk_order": bool(self.chunk_order), "release_unread": self.release_unread,
            "page_b_order": bool(self.page_b_order), "pair_load_order": bool(self.pair_load_order),
            "p_b_buffer": getattr(self, "p_b_buffer", False)},
            "each assumes one tile per CTA: change them or set persistent = False.")

    @cute.jit
    def _persistent_producer(self, first, step, n_tiles, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe, kv_pipe, mBT,
                             mLens, mSem):
        """Warp 0 of the producer warpgroup: per tile, Q once its slot is free, then the pages in pairs."""
        cpasync.prefetch_descriptor(tma_q)
        cpasync.prefetch_descriptor(tma_kv)
        q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
        kv_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages * self.kv_chunks)
        if cutlass.const_expr(self.redo_list):
            q_state, kv_state = self._produce_flagged(first, step, n_tiles, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK,
                                                      q_pipe, kv_pipe, mBT, mLens, mSem, q_state, kv_state)
        else:
            for tile in cutlass.range(first, n_tiles, step, unroll=1):
                q_state, kv_state = self._produce_tile(tile, first, None, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe,
                                                       kv_pipe, mBT, mLens, q_state, kv_state)
            if cutlass.const_expr(self.redo_inline):
                # wait for the consumers' last epilogue (and with it every flag of this CTA's tiles), then load the
                # flagged tiles again for the exact loop; the first of them loads Q first (the consumers gave it back)
                cute.arch.barrier(barrier_id=BAR_REDO, number_of_threads=CONSUMERS + 32)
                q_state, kv_state = self._produce_flagged(first, step, n_tiles, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK,
                                                          q_pipe, kv_pipe, mBT, mLens, mSem, q_state, kv_state)

    @cute.jit
    def _produce_flagged(self, first, step, n_tiles, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe, kv_pipe, mBT,
                         mLens, mSem, q_state, kv_state):
        """The producer's loop over the flagged tiles only (v57_cute's redo kernel, v58_cute's second loop); the
        first of them takes the first tile's Q order.  Returns the pipeline states."""
        started = cutlass.Int32(0)
        pre = self._flags_ahead(mSem, first, step, n_tiles)
        for tile in cutlass.range(first, n_tiles, step, unroll=1):
            if self._flag_of(mSem, pre, tile, first, step) != 0:
                q_state, kv_state = self._produce_tile(tile, first, started, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK,
                                                       q_pipe, kv_pipe, mBT, mLens, q_state, kv_state)
                started = cutlass.Int32(1)
        return q_state, kv_state

    @cute.jit
    def _produce_tile(self, tile, first, started, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe, kv_pipe, mBT, mLens,
                      q_state, kv_state):
        """Q and the pages of tile ``tile``; the CTA's first tile (``first``; with ``redo_list`` the first one
        taken, ``started == 0``) loads Q first.  Returns the pipeline states."""
        m_block = tile % self.m_blocks
        bi = tile // self.m_blocks
        n_pages = (mLens[bi] + PAGE - 1) // PAGE
        # Q's slot comes free only after the previous tile's epilogue, page A's and B's before it: after
        # the first tile, the first pair's pages go out first and land while the epilogue runs (with
        # loop_q_early the slot frees at the previous tile's last S GEMMs, before its pages: Q goes first)
        n_load = (n_pages + 1) // 2 * 2  # an odd last page is followed by itself again: whole pairs of stages
        q_at = cutlass.Int32(0 if self.loop_q_early else 2)  # the page before which Q goes out
        if cutlass.const_expr(started is not None):  # the flagged loop (redo_list, or redo_inline's second loop)
            if started == 0:
                q_at = cutlass.Int32(0)
        else:
            if tile == first:
                q_at = cutlass.Int32(0)
        q_at = cutlass.min(q_at, n_load)  # a tile without pages still gets its Q (the spec has none)
        for p in cutlass.range(0, n_load, unroll=1):
            if p == q_at:
                self._load_q(tma_q, tQgQ, tQsQ, q_pipe, q_state, m_block, bi)
                q_state.advance()
            page = mBT[bi, cutlass.min(p, n_pages - 1)]
            for j in cutlass.range_constexpr(self.kv_chunks):
                kv_pipe.producer_acquire(kv_state)
                self._kv_copy(tma_kv, tKgK[(None, 0, j, page)], tKsK[(None, kv_state.index)],
                              kv_pipe.producer_get_barrier(kv_state))
                kv_state.advance()
        if q_at == n_load:  # a one-pair tile after the first: Q after its two pages
            self._load_q(tma_q, tQgQ, tQsQ, q_pipe, q_state, m_block, bi)
            q_state.advance()
        return q_state, kv_state

    @cute.jit
    def _load_q(self, tma_q, tQgQ, tQsQ, q_pipe, q_state, m_block, bi):
        """Q of tile (m_block, bi) into its buffer once the consumers gave the slot back (the caller advances
        ``q_state``: a state changed inside a helper does not leave a staged branch)."""
        q_pipe.producer_acquire(q_state)
        cute.copy(tma_q, tQgQ[(None, m_block, 0, bi)], tQsQ[(None, 0)], tma_bar_ptr=q_pipe.producer_get_barrier(q_state))


class MlaSplitSm90SeesawPersistentQLast(MlaSplitSm90SeesawPersistent):
    """v36_cute's loop with Q's buffer placed after the KV ring (``q_after_kv``), so that ptxas keeps the
    shared-memory base in a uniform register: no R2UR in the consumers' pair loops (v36_cute: 10 and 16)."""

    q_after_kv = True


class MlaSplitSm90SeesawPersistentQEarly(MlaSplitSm90SeesawPersistentQLast):
    """v46_cute's loop with the next tile's Q loaded during this tile's last P V GEMMs and epilogue
    (``loop_q_early``: Q's buffer given back after the last S GEMMs, O stored from registers)."""

    loop_q_early = True  # (the one-tile kernels of the same kind, decode's, keep the TMA-store epilogue)


class MlaSplitSm90SeesawPersistentRedo(MlaSplitSm90SeesawPersistentQLast):
    """v57_cute's redo for one-split shapes: v46_cute's loop over the tiles the stale-max kernel flagged (one int32
    per tile, zeroed as the tile is taken), so a launch with nothing flagged is one wave of CTAs that read their
    tiles' flags and exit, instead of the guarded full grid's ~8 waves on spec (``_cute_seesaw_stale``)."""

    redo_list = True



class MlaSplitSm90SeesawPersistentStale(MlaSplitSm90SeesawPairStaleRedo, MlaSplitSm90SeesawPersistentQLast):
    """v58_cute: v57_cute's stale-max pair (WG1's P_A V_AR first, unsure rows flagged) in v46_cute's loop, and
    then, in the same kernel, v35_cute's exact pair over the tiles the first loop flagged (``redo_inline``): no
    second launch.  The CTA's producer warp and consumers meet at a barrier between the loops; each tile is
    flagged by its consumers after its epilogue and zeroed by the exact loop.  Shapes that do not loop (decode's
    merged pairs, split partials) run v57_cute's one-tile kernel and its guarded redo launch."""

    redo_inline = True


class MlaSplitSm90SeesawOneTileStale(MlaSplitSm90SeesawPersistentStale):
    """v60_cute: v58_cute's kernel with one CTA per tile (the grid is every tile, as v57_cute's one-tile grid), so
    each CTA runs its tile with the stale-max pair and, if it flagged it, once more with the exact pair: no redo
    launch, and no tile loop (v58_cute's persistent loop cost the stale pair ~11 us of ncu time on spec)."""

    max_ctas = 1 << 30  # every tile its own CTA: each loop below runs at most one tile
