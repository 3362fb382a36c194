"""Constants and small trace-time helpers shared by the sm_90 CuTe DSL MLA kernels.

``_cute_sm90`` (v4_cute..v7_cute, and the CTA of every later sm_90 kernel), ``_cute_sm90_halfpage``
(the v4_cute..v7_cute consumer) and ``_cute_seesaw`` (v8_cute on) all use them.
"""

from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline

D_QK = 576
D_V = 512
PAGE = 64
BLOCK_M = 64
HALF = PAGE // 2
LN_2 = 0.6931471805599453
BAR_MAX, BAR_P_FREE, BAR_P_READY = 1, 2, 3
CONSUMERS = 256
#: threads of one consumer warpgroup
WG = 128
#: CUTLASS's CacheHintSm90::EVICT_FIRST policy word for TMA loads (L2 evicts these lines first)
EVICT_FIRST = 0x12F0000000000000


def _mn_view(acc: cute.Tensor) -> cute.Tensor:
    """View a wgmma accumulator fragment ((2, 2, N/8), 1, 1) as (rows, cols) of this thread.

    Value mode 0 = column pair, mode 1 = row +8, mode 2 = 8-column block (the sm90 C layout).
    """
    lay = cute.make_layout(acc.layout.shape)
    s, d = lay.shape, lay.stride
    mn = cute.make_layout(
        ((s[0][1], s[1]), (s[0][0], s[0][2], s[2])),
        stride=((d[0][1], d[1]), (d[0][0], d[0][2], d[2])),
    )
    return cute.make_tensor(acc.iterator, cute.composition(acc.layout, mn))


def _quad_reduce(val, op):
    """Reduce over the 4 lanes of a quad (they hold the same accumulator rows)."""
    val = op(val, cute.arch.shuffle_sync_bfly(val, offset=2, mask=-1, mask_and_clamp=31))
    val = op(val, cute.arch.shuffle_sync_bfly(val, offset=1, mask=-1, mask_and_clamp=31))
    return val


@cute.jit
def _mask_row(acc_S_mn, tScS_mn, r, p, first_masked_pos, m_block, h):
    """Mask row r of page p's S: a row with draft index i (folded row // h) sees positions
    < first_masked_pos + i; the page holds positions [64 p, 64 p + 64), so columns from
    ``limit`` on get -inf."""
    row = m_block * BLOCK_M + tScS_mn[r, 0][0]
    limit = first_masked_pos + row // h - p * PAGE  # first masked column in the page
    for k in cutlass.range_constexpr(cute.size(acc_S_mn.shape[1])):
        if tScS_mn[0, k][1] >= limit:
            acc_S_mn[r, k] = -cutlass.Float32.inf


@cute.jit
def _masked_row_max(acc_S_mn, tScS_mn, r, need_mask, p, first_masked_pos, m_block, h):
    """Mask row r of page p's S (when ``need_mask``, see ``_mask_row``) and return its maximum over the quad."""
    if need_mask:
        _mask_row(acc_S_mn, tScS_mn, r, p, first_masked_pos, m_block, h)
    return _quad_reduce(
        acc_S_mn[r, None].load().reduce(cute.ReductionOp.MAX, -cutlass.Float32.inf, 0), cute.arch.fmax
    )


@cute.jit
def _exp_row(acc_S_mn, r, old_max, new_max, scale_log2, row_sum, factor):
    """Turn row r of S into P = exp2((S - new_max) * scale); ``factor[r]`` rescales what was relative to old_max.

    ``row_sum[r]`` is rescaled and gets P's row sum (``row_sum`` None: the caller sums the row
    itself).  A row may see no key yet (causal window, empty split): new_max = -inf is replaced by 0
    so exp2 stays finite (P = 0, factor = 0).
    """
    safe_max = 0.0 if new_max == -cutlass.Float32.inf else new_max
    probs = cute.math.exp2(acc_S_mn[r, None].load() * scale_log2 - safe_max * scale_log2, fastmath=True)
    factor[r] = cute.math.exp2(old_max * scale_log2 - safe_max * scale_log2, fastmath=True)
    if cutlass.const_expr(row_sum is not None):
        row_sum[r] = row_sum[r] * factor[r] + probs.reduce(cute.ReductionOp.ADD, cutlass.Float32.zero, 0)
    acc_S_mn[r, None] = probs


def _gemm(tiled_mma: cute.TiledMma, acc: cute.Tensor, a: cute.Tensor, b: cute.Tensor) -> None:
    """Issue one accumulating wgmma chain over the K blocks of a and b (no fence / commit here).

    A plain Python helper: its loop runs at trace time, so the chain is fully unrolled.  The
    accumulate flag is set once, at the top of the kernel; S tiles are zero-filled instead of
    toggling it (a flag set inside a loop body through a helper is a value the tracer cannot
    thread out of that body).
    """
    for k in range(cute.size(a, mode=[2])):
        cute.gemm(tiled_mma, acc, a[None, None, k], b[None, None, k], acc)


class KvLoads:
    """The producer's KV loads (a mixin of ``_cute_sm90.MlaSplitSm90``): one block's TMA copy, an L2 prefetch."""

    evict_first: bool
    cluster: int
    pair: bool
    _mcast_mask: Any
    kv_chunks: int
    stages: int
    chunk_order: tuple[int, ...]
    page_b_order: tuple[int, ...]
    pair_load_order: tuple[tuple[int, int], ...]
    reader_reloads: bool

    def _kv_copy(self, tma_kv, src, dst, bar) -> None:
        """One KV block's TMA load (with the evict-first hint and the cluster multicast where configured)."""
        extra = {}
        if self.evict_first:
            extra["cache_policy"] = cutlass.Int64(EVICT_FIRST)
        if self.cluster > 1:
            # a merging pair with row-block multicast (v67_cute) sends each load to its own split's CTAs only
            extra["mcast_mask"] = self._mcast_mask if self.pair else cutlass.Int16((1 << self.cluster) - 1)
        cute.copy(tma_kv, src, dst, tma_bar_ptr=bar, **extra)

    @cute.jit
    def _kv_page_in_order(self, tma_kv, tKgK, tKsK, kv_pipe, page, q, mSem):
        """Page q of the split into ring stage q % stages, its chunks in ``chunk_order`` (v37_cute: the chunk
        the consumers free first goes out first).  Explicit pipeline states: a producer's pass n of the ring
        waits on phase (n + 1) % 2 (its first pass finds every slot empty)."""
        order, _ = self._load_orders()
        stage = q % self.stages
        phase = (q // self.stages + 1) % 2
        for i in cutlass.range_constexpr(len(order)):
            # the probe: the page's first / last slot (in load order) came free
            self._kv_chunk_load(tma_kv, tKgK, tKsK, kv_pipe, page, order[i], stage * self.kv_chunks + order[i], phase,
                                mSem, q, i in (0, len(order) - 1), i > 0)

    @staticmethod
    def _pair_pages(k, p_begin, p_end):
        """Pair k's page A (page ``p_begin + 2k`` of the tile) and whether a page B follows it (an odd page
        count leaves the last pair without one)."""
        pa = p_begin + 2 * k
        return pa, pa + 1 < p_end

    @staticmethod
    def _pair_block_ids(mBT, bi, pa, p_end):
        """The cache blocks of the pair whose page A is page ``pa`` of sequence ``bi``: (page A's, page B's), page
        B's index clamped into the split (a pair without page B loads nothing for it: ``has_b``)."""
        return mBT[bi, pa], mBT[bi, cutlass.min(pa + 1, p_end - 1)]

    def _load_orders(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(page A's, page B's) chunk load orders; raises when one misses a chunk (its slot would never fill:
        a hang)."""
        if self.page_b_order and not self.pair_load_order and not self.reader_reloads:
            raise ValueError(f"{type(self).__name__}.page_b_order needs pair_load_order (page by page, the producer "
                             "loads page B in page A's order, and S_B would wait past later loads); set both or neither")
        order_a = tuple(self.chunk_order) or tuple(range(self.kv_chunks))
        order_b = tuple(self.page_b_order) or order_a
        for name, order in (("chunk_order", order_a), ("page_b_order", order_b)):
            if sorted(order) != list(range(self.kv_chunks)):
                raise ValueError(f"{type(self).__name__}.{name} = {order!r} must list each of the "
                                 f"{self.kv_chunks} chunks 0..{self.kv_chunks - 1} once; fix it or set ()")
        return order_a, order_b

    def _pair_order(self) -> tuple[tuple[tuple[int, int], ...], tuple[int, int], tuple[int, int]]:
        """``pair_load_order`` checked: every (stage, chunk) of both pages once, each page's chunks in the order its
        S reads them (``chunk_order`` / ``page_b_order``), else a slot never fills or S waits past a later load.

        Returns (the order, each page's first position in it, each page's last position): the probe stamps a
        page's first and last slot there."""
        order = tuple(self.pair_load_order)
        want = sorted((s, j) for s in range(2) for j in range(self.kv_chunks))
        reads = self._load_orders()
        if self.stages != 2 or sorted(order) != want or any(
                tuple(j for s, j in order if s == st) != reads[st] for st in range(2)):
            raise ValueError(f"{type(self).__name__}.pair_load_order = {order!r} must list each (stage, chunk) of "
                             f"the two stages once, each page's chunks in its read order {reads!r}; fix it or set ()")
        at = [[i for i, (st, _) in enumerate(order) if st == page] for page in range(2)]
        return order, (at[0][0], at[1][0]), (at[0][-1], at[1][-1])

    @cute.jit
    def _kv_pairs_in_order(self, tma_kv, tKgK, tKsK, kv_pipe, mBT, bi, p_begin, p_end, n_iter, mSem):
        """The split's pages pair by pair, each pair's chunks in ``pair_load_order`` (page B's only when the pair
        has one).  Pair k is ring pass k: its slots were freed by pass k - 1 (phase (k + 1) % 2)."""
        order, firsts, lasts = self._pair_order()
        for k in cutlass.range((n_iter + 1) // 2, unroll=1):
            pa, has_b = self._pair_pages(k, p_begin, p_end)
            page_a, page_b = self._pair_block_ids(mBT, bi, pa, p_end)
            phase = (k + 1) % 2
            for i in cutlass.range_constexpr(len(order)):
                st, j = order[i]
                if cutlass.const_expr(st == 0):
                    self._kv_chunk_load(tma_kv, tKgK, tKsK, kv_pipe, page_a, j, j, phase, mSem, 2 * k,
                                        i in (firsts[0], lasts[0]), i == lasts[0])
                else:
                    if has_b:
                        self._kv_chunk_load(tma_kv, tKgK, tKsK, kv_pipe, page_b, j, self.kv_chunks + j, phase, mSem,
                                            2 * k + 1, i in (firsts[1], lasts[1]), i == lasts[1])

    @cute.jit
    def _kv_chunk_load(self, tma_kv, tKgK, tKsK, kv_pipe, page, j, slot, phase, mSem, q,
                       stamp: cutlass.Constexpr, last: cutlass.Constexpr):
        """Chunk j of ``page`` into ring slot ``slot`` once its pass is free (``stamp``: the probe's first / last
        slot of page q)."""
        state = pipeline.PipelineState(self.stages * self.kv_chunks, cutlass.Int32(0), slot, phase)
        kv_pipe.producer_acquire(state)
        if cutlass.const_expr(self.trace and stamp):
            self._slot_free(mSem, q, last)
        self._kv_copy(tma_kv, tKgK[(None, 0, j, page)], tKsK[(None, slot)], kv_pipe.producer_get_barrier(state))

    @cute.jit
    def _prefetch_page(self, tma_kv, tKgK, mBT, bi, m_block, p, p_end):
        """Row block 0's producer: bring page p (if in this split) into L2, chunk by chunk.

        The other row blocks of the sequence read the same pages, so one prefetch serves them all.
        """
        if p < p_end:
            if m_block == 0:
                page = mBT[bi, p]
                for j in cutlass.range_constexpr(self.kv_chunks):
                    cute.prefetch(tma_kv, tKgK[(None, 0, j, page)])
