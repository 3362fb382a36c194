"""The seesaw consumer's building blocks: block waits and releases, GEMM issue, softmax steps.

Mixed into ``_cute_seesaw.MlaSplitSm90Seesaw`` (the pair loop lives there); every method is
inlined where the loop calls it, so moving them here changed no PTX.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.sm90_parts import (
    BLOCK_M, CONSUMERS, D_QK, D_V, PAGE, WG, _exp_row, _gemm, _mask_row, _masked_row_max, _mn_view,
)

# named barriers: P_A and m0 published / P_B and m1 published / row sums published /
# WG c's own P written (its wgmma reads rows written by its other warps): BAR_WG + c
BAR_S0, BAR_S1, BAR_SUM, BAR_WG = 4, 5, 6, 7
#: WG1 has issued P_A V_AR (v27_cute: WG0 queues P_A V_AL only after it)
BAR_VR = 9
#: WG0's page-A softmax is done (the solo-softmax probe only: S_B waits for it)
BAR_SOLO = 10
#: m0 published, P_A not yet (``m0_first``, v40_cute)
BAR_M0 = 11


def _tree_sum(vals: list):
    """Pairwise sum of trace-time values: log2(n) dependent adds instead of n (a plain helper,
    so its loop runs while tracing, outside the DSL's control flow)."""
    while len(vals) > 1:
        vals = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)] + vals[len(vals) - len(vals) % 2:]
    return vals[0]


class SeesawOps:
    """Per-page operations of the seesaw pair loop (see ``_cute_seesaw``)."""

    stages: int
    kv_chunks: int
    chunk_order: tuple[int, ...]
    release_unread: bool
    h: int
    own_p_rs: bool
    early_release: bool
    softmax_ilp: bool
    q_reg_blocks: int

    # (from KvLoads, the other mixin of every kernel class: each page's chunk load order, checked)
    _load_orders: Any

    def _chunk(self, stage: int, j: int, ph):
        """Pipeline state of KV chunk j of a page in ``stage`` (0 = A, 1 = B), phase ``ph``."""
        return pipeline.PipelineState(
            self.stages * self.kv_chunks, cutlass.Int32(0), cutlass.Int32(stage * self.kv_chunks + j), ph
        )

    @staticmethod
    def _row_state(acc_O, n_scales: int):
        """A tile's running-softmax registers for this thread's O rows: (rows, max = -inf, row sum = 0,
        ``n_scales`` scale tensors)."""
        f32 = cutlass.Float32
        n_rows = cute.size(_mn_view(acc_O).shape[0])
        m_run = cute.make_rmem_tensor(n_rows, f32)
        row_sum = cute.make_rmem_tensor(n_rows, f32)
        scales = [cute.make_rmem_tensor(n_rows, f32) for _ in range(n_scales)]
        m_run.fill(-cutlass.Float32.inf)
        row_sum.fill(0.0)
        return (n_rows, m_run, row_sum, *scales)

    @staticmethod
    def _pass_parity(k, ph0=None):
        """The ring pass parity of pair k of a tile: k % 2, or with the persistent loop's ``ph0`` (passes
        of the earlier tiles) (ph0 + k) % 2."""
        return k % 2 if ph0 is None else (ph0 + k) % 2

    def _s_blocks(self, stage: int) -> tuple[int, ...]:
        """The order S reads the blocks of the page in ``stage``: the order they load in (``KvLoads._load_orders``:
        ``chunk_order``, and ``page_b_order`` for page B where set, v49_cute)."""
        return self._load_orders()[stage]

    def _refuse_flags(self, what: str, flags: Mapping[str, Any], fix: str) -> None:
        """(trace time) Raise one sentence naming the set ones among ``flags`` (name -> value) that ``what``
        cannot run with, and ``fix``; nothing when none is set."""
        clash = [name for name, on in flags.items() if on]
        if clash:
            raise ValueError(f"{type(self).__name__}: {what} cannot run with {', '.join(clash)}; {fix}")

    def _blocks(self, half: int | None = None) -> tuple[int, ...]:
        """The 64-dim KV blocks of a page: all of them, or those holding O columns of warpgroup ``half``."""
        if half is None:
            return tuple(self.chunk_order) if self.chunk_order else tuple(range(self.kv_chunks))
        width = D_QK // self.kv_chunks
        return tuple(range(half * (D_V // 2) // width, -(-(half + 1) * (D_V // 2) // width)))

    @cute.jit
    def _qk(self, kv_pipe, qk_mma, acc_S, tSrQ, tSrK, stage: cutlass.Constexpr, ph, q_regs=None):
        """Issue S = Q K^T of the page in ``stage``, each block's k-steps right after that block landed."""
        self._qk_blocks(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, stage, ph, self._s_blocks(stage), q_regs)

    @cute.jit
    def _qk_blocks(self, kv_pipe, qk_mma, acc_S, tSrQ, tSrK, stage: cutlass.Constexpr, ph, blocks: cutlass.Constexpr,
                   q_regs=None):
        """Issue S += Q K^T over the listed 64-dim blocks of the page in ``stage`` (one commit group).

        ``q_regs`` = (rs tiled MMA, Q fragments): the first k-steps read Q from registers (v20_cute).
        """
        per_chunk = cute.size(tSrK, mode=[2]) // self.kv_chunks
        n_reg = 0
        if cutlass.const_expr(q_regs is not None):
            n_reg = cute.size(q_regs[1], mode=[2])
        warpgroup.fence()
        for i in cutlass.range_constexpr(len(blocks)):
            j = blocks[i]
            kv_pipe.consumer_wait(self._chunk(stage, j, ph))
            for kk in cutlass.range_constexpr(j * per_chunk, (j + 1) * per_chunk):
                if cutlass.const_expr(kk < n_reg):
                    cute.gemm(q_regs[0], acc_S, q_regs[1][None, None, kk], tSrK[None, None, kk, stage], acc_S)
                else:
                    cute.gemm(qk_mma, acc_S, tSrQ[None, None, kk, 0], tSrK[None, None, kk, stage], acc_S)
        warpgroup.commit_group()

    @cute.jit
    def _consumer_begin(self, q_pipe, mSem, ctid, c, q_state=None):
        """A consumer warpgroup's start: the probe header's start words, then the wait for Q; returns the Q
        pipeline state it waited on (``q_state``, or the first tile's when None)."""
        self._hdr(mSem, ctid, c)  # consumer start
        if c == 0:
            self._hdr(mSem, ctid, 8, True)  # global timer at WG0's start
        if cutlass.const_expr(q_state is None):
            q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        q_pipe.consumer_wait(q_state)
        self._hdr(mSem, ctid, 2 + c)  # Q landed
        return q_state

    @cute.jit
    def _s_page(self, kv_pipe, qk_mma, s_shape, tSrQ, tSrK, stage: cutlass.Constexpr, ph, present=True, q_regs=None):
        """A fresh S accumulator with S = Q K^T of the page in ``stage`` issued into it, or all -inf when the pair
        has no such page (``present`` False: page B of an odd last pair; its P is then 0 and its row max -inf)."""
        acc_S = cute.make_rmem_tensor(s_shape, cutlass.Float32)
        if present:
            acc_S.fill(0.0)
            self._qk(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, stage, ph, q_regs)
        else:
            acc_S.fill(-cutlass.Float32.inf)
        return acc_S

    @cute.jit
    def _pv(self, kv_pipe, mma, acc_O, tA, tOrV, stage: cutlass.Constexpr, ph, half: cutlass.Constexpr):
        """Issue O += P V of the page in ``stage`` for the O columns of WG ``half`` (waits its V blocks).

        ``tA``: P as this page's smem A operand (ss ``mma``) or as register fragments (rs ``mma``).
        """
        self._wait_blocks(kv_pipe, stage, ph, self._blocks(half))
        self._pv_gemm(mma, acc_O, tA, tOrV, stage)

    @cute.jit
    def _pv_gemm(self, mma, acc_O, tA, tOrV, stage: cutlass.Constexpr):
        """Issue O += P V for one page (no waits), one commit group."""
        warpgroup.fence()
        _gemm(mma, acc_O, tA, tOrV[None, None, None, stage])
        warpgroup.commit_group()

    @cute.jit
    def _wait_blocks(self, kv_pipe, stage: cutlass.Constexpr, ph, blocks: cutlass.Constexpr):
        for i in cutlass.range_constexpr(len(blocks)):
            kv_pipe.consumer_wait(self._chunk(stage, blocks[i], ph))

    @cute.jit
    def _release_blocks(self, kv_pipe, stage: cutlass.Constexpr, ph, blocks: cutlass.Constexpr):
        for i in cutlass.range_constexpr(len(blocks)):
            kv_pipe.consumer_release(self._chunk(stage, blocks[i], ph))

    def _q_registers(self, qk_rs, sQ, ctid, q_pipe):
        """This thread's A fragments of Q's first ``q_reg_blocks`` 64-dim blocks, copied once from smem."""
        q_pipe.consumer_wait(pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1))
        thr = qk_rs.get_slice(ctid)
        sQr = cute.local_tile(sQ, (BLOCK_M, 64 * self.q_reg_blocks, 1), (0, 0, 0))
        rQ = qk_rs.make_fragment_A(thr.partition_shape_A((BLOCK_M, 64 * self.q_reg_blocks)))
        cute.autovec_copy(thr.partition_A(sQr)[None, None, None, 0], rQ)
        return rQ

    def _bf16(self, acc_S):
        """bf16 copy of P (an m64n64 fp32 accumulator), in the accumulator's register order."""
        rP = cute.make_fragment_like(acc_S, cutlass.BFloat16)
        rP.store(acc_S.load().to(cutlass.BFloat16))
        return rP

    def _p_operand(self, rP, frag_layout):
        """The bf16 P of ``_bf16`` viewed as the m64k16 A fragments of the P V rs-wgmma.

        Both layouts give thread t the values (row, token) in the same order: the accumulator's
        (pair, row+8, 8-token block b) is the A fragment's (pair, row+8, b % 2) of k-block b // 2.
        """
        return cute.make_tensor(rP.iterator, frag_layout)

    def _unread(self, half: int) -> tuple[int, ...]:
        """The blocks of a page that hold none of warpgroup ``half``'s O columns."""
        return tuple(j for j in self._blocks() if j not in self._blocks(half))

    def _wg0_kept(self) -> tuple[int, ...]:
        """The blocks of page A WG0 gives back after its P_A V_AL: all, or (``release_unread``) its O columns'."""
        return self._blocks(0) if self.release_unread else self._blocks()

    def _wg1_rest(self, stage: int = 1) -> tuple[int, ...]:
        """The blocks of the page in ``stage`` WG1 gives back after its P V: all, or those it did not give back
        before (``early_release``: after S; ``wg1_free_unread_a``: page A's unread ones at barrier S0, or M0 in the
        B-first pair)."""
        if self.early_release:
            return tuple(j for j in self._blocks() if j not in self._blocks(0))
        if self.wg1_free_unread_a and stage == 0:
            return tuple(j for j in self._blocks() if j not in self._wg1_unread_a())
        return self._blocks()

    def _wg1_unread_a(self) -> tuple[int, ...]:
        """Page A's blocks WG1 never reads: none of its O columns (V_AR) nor P_A's RoPE block (dims D_V..)."""
        return tuple(j for j in self._unread(1) if j != D_V // (D_QK // self.kv_chunks))

    @cute.jit
    def _stand_in_b(self, kv_pipe, ph, pa, p_end, wait: cutlass.Constexpr):
        """The persistent loop's stand-in page B (``_cute_persistent``: the producer loads a tile's odd last page
        again to keep whole pairs in the ring), given back in the pair that has no real page B: WG1 (``wait``)
        lets it land first, WG0 releases at once (the stage refills only once both have)."""
        if pa + 1 >= p_end:
            if cutlass.const_expr(wait):
                self._wait_blocks(kv_pipe, 1, ph, self._blocks())
            self._release(kv_pipe, 1, ph)

    @cute.jit
    def _release(self, kv_pipe, stage: cutlass.Constexpr, ph):
        """This WG is done with the page in ``stage``: release all its blocks."""
        self._release_blocks(kv_pipe, stage, ph, self._blocks())

    @cute.jit
    def _page_softmax(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale):
        """Mask page p, raise ``m_run`` by its row maxima, turn S into P; ``scale`` = old-max factor."""
        if cutlass.const_expr(self.softmax_ilp):
            self._page_softmax_ilp(acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale)
            return
        acc_S_mn = _mn_view(acc_S)
        n_rows = cute.size(acc_S_mn.shape[0])
        need_mask = p * PAGE + PAGE > first_masked_pos
        for r in cutlass.range_constexpr(n_rows):
            cur = _masked_row_max(acc_S_mn, tScS_mn, r, need_mask, p, first_masked_pos, m_block, self.h)
            new_max = cute.arch.fmax(m_run[r], cur)
            _exp_row(acc_S_mn, r, m_run[r], new_max, scale_log2, row_sum, scale)
            m_run[r] = new_max

    @cute.jit
    def _page_softmax_ilp(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale):
        """``_page_softmax`` as one straight-line block over both rows (v29_cute).

        The per-row form puts the mask test of each row in a branch, so the rows' chains (max,
        two shuffles, 16 exp2, a 16-add sum) run one after the other: ~300 cycles each of mostly
        latency.  Here the (rare) mask runs for all rows in one branch first, then the rows'
        maxima, shuffles, exponentials and tree sums are interleaved, leaving the scheduler
        two independent chains and the exp2 pipe as the only floor.
        """
        acc_S_mn = _mn_view(acc_S)
        n_rows = cute.size(acc_S_mn.shape[0])
        n_cols = cute.size(acc_S_mn.shape[1])
        if p * PAGE + PAGE > first_masked_pos:
            for r in cutlass.range_constexpr(n_rows):
                _mask_row(acc_S_mn, tScS_mn, r, p, first_masked_pos, m_block, self.h)
        cur = [acc_S_mn[r, None].load().reduce(cute.ReductionOp.MAX, -cutlass.Float32.inf, 0)
               for r in range(n_rows)]
        for off in (2, 1):  # the quad's lanes hold the same rows
            other = [cute.arch.shuffle_sync_bfly(cur[r], offset=off, mask=-1, mask_and_clamp=31) for r in range(n_rows)]
            cur = [cute.arch.fmax(cur[r], other[r]) for r in range(n_rows)]
        for r in cutlass.range_constexpr(n_rows):
            new_max = cute.arch.fmax(m_run[r], cur[r])
            _exp_row(acc_S_mn, r, m_run[r], new_max, scale_log2, None, scale)  # the row sums: below, as trees
            m_run[r] = new_max
        for r in cutlass.range_constexpr(n_rows):
            row_sum[r] = row_sum[r] * scale[r] + _tree_sum([acc_S_mn[r, k] for k in range(n_cols)])

    @cute.jit
    def _softmax_b(self, acc_S, tScS_mn, tPsP, sh, pa, has_b, first_masked_pos, m_block, scale_log2, m_run, row_sum,
                   scale, c, mSem, ctid, k):
        """WG1: page B's softmax against m0, then publish m1 and P_B (barrier S1); returns P_B in bf16 registers."""
        self._page_softmax(acc_S, tScS_mn, pa + 1, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale)
        self._ev(mSem, ctid, c, k, 8)  # softmax arithmetic done
        return self._publish_b(acc_S, tScS_mn, tPsP, sh, has_b, m_run, c, mSem, ctid, k)

    @cute.jit
    def _publish_b(self, acc_S, tScS_mn, tPsP, sh, has_b, m_run, c, mSem, ctid, k,
                   max_stored: cutlass.Constexpr = False):
        """WG1: publish m1 (``m_run``; ``max_stored``: the caller wrote it) and P_B (bf16, into page B's RoPE
        block), arrive on barrier S1; returns P_B."""
        if cutlass.const_expr(not max_stored):
            self._publish_max(sh, 1, tScS_mn, m_run)
        rPb = self._bf16(acc_S)
        if has_b:
            self._store_p(rPb, tPsP[None, None, None, 1], c)
        self._ev(mSem, ctid, c, k, 9)  # P stored and fenced
        cute.arch.barrier_arrive(barrier_id=BAR_S1, number_of_threads=CONSUMERS)
        return rPb

    @cute.jit
    def _softmax_provisional(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run):
        """WG1, before m0 is known: mask page p, P' = e(S - m') with m' = max(m, rowmax S) (v30_cute).

        Returns (m', P' row sums); ``m_run`` and the row sums stay as they were, for
        ``_publish_b_provisional`` to bring P' to the true m1 = max(m0, m') once m0 arrived.
        """
        acc_S_mn = _mn_view(acc_S)
        n_rows = cute.size(acc_S_mn.shape[0])
        m_prov = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        sums = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        unused = cute.make_rmem_tensor(n_rows, cutlass.Float32)
        need_mask = p * PAGE + PAGE > first_masked_pos
        for r in cutlass.range_constexpr(n_rows):
            cur = _masked_row_max(acc_S_mn, tScS_mn, r, need_mask, p, first_masked_pos, m_block, self.h)
            m_prov[r] = cute.arch.fmax(m_run[r], cur)
            sums[r] = 0.0  # (x 0 below: _exp_row's factor is never NaN, so the sum is P's alone)
            _exp_row(acc_S_mn, r, m_run[r], m_prov[r], scale_log2, sums, unused)
        return m_prov, sums

    @cute.jit
    def _publish_b_provisional(self, acc_S, tScS_mn, tPsP, sh, prov, has_b, scale_log2, m_run, row_sum, scale, c,
                               mSem, ctid, k):
        """WG1, m0 adopted (``m_run`` = m0): m1 = max(m0, m'), P_B = P' e(m' - m1), row sums and
        ``scale`` = e(m0 - m1) as ``_softmax_b`` leaves them; then publish m1 and P_B (barrier S1)."""
        m_prov, sums = prov
        acc_S_mn = _mn_view(acc_S)
        for r in cutlass.range_constexpr(cute.size(m_run)):
            m1 = cute.arch.fmax(m_run[r], m_prov[r])
            safe = 0.0 if m1 == -cutlass.Float32.inf else m1
            f = cute.math.exp2(m_prov[r] * scale_log2 - safe * scale_log2, fastmath=True)  # <= 1; 0 if m' = -inf
            scale[r] = cute.math.exp2(m_run[r] * scale_log2 - safe * scale_log2, fastmath=True)
            row_sum[r] = row_sum[r] * scale[r] + sums[r] * f
            acc_S_mn[r, None] = acc_S_mn[r, None].load() * f
            m_run[r] = m1
            sh[1, tScS_mn[r, 0][0]] = m1
        return self._publish_b(acc_S, tScS_mn, tPsP, sh, has_b, m_run, c, mSem, ctid, k, max_stored=True)

    @cute.jit
    def _publish_max(self, sh, slot, tScS_mn, m_run):
        """Write this WG's rows of a max (``m_run``) into smem slot ``slot`` for the other WG (the seesaw's 0 = m0,
        1 = m1 for ``_adopt_max``; the stale-max pair's row-max slots); the caller's barrier arrival publishes it."""
        for r in cutlass.range_constexpr(cute.size(m_run)):
            sh[slot, tScS_mn[r, 0][0]] = m_run[r]

    @cute.jit
    def _adopt_max(self, sh, slot, tScS_mn, scale_log2, m_run, row_sum, scale):
        """Take the other WG's published max (never below ``m_run``); ``scale`` = old-max factor."""
        for r in cutlass.range_constexpr(cute.size(m_run)):
            new_max = sh[slot, tScS_mn[r, 0][0]]
            safe_max = 0.0 if new_max == -cutlass.Float32.inf else new_max
            scale[r] = cute.math.exp2(m_run[r] * scale_log2 - safe_max * scale_log2, fastmath=True)
            row_sum[r] = row_sum[r] * scale[r]
            m_run[r] = new_max

    @cute.jit
    def _rescale(self, acc_O, scale):
        acc_O_mn = _mn_view(acc_O)
        for r in cutlass.range_constexpr(cute.size(scale)):
            acc_O_mn[r, None] = acc_O_mn[r, None].load() * scale[r]

    @cute.jit
    def _store_p(self, rP, tPsP, c):
        """Write this WG's bf16 P (``_bf16``) into a page's RoPE block; visible to both WGs' wgmma (async proxy)."""
        cute.autovec_copy(rP, tPsP)
        cute.arch.fence_proxy("async.shared", space="cta")
        if cutlass.const_expr(not self.own_p_rs):
            # this WG's own P V reads rows its other warps wrote
            cute.arch.barrier(barrier_id=BAR_WG + c, number_of_threads=WG)

    def _p_tiles_interleaved(self, sKV):
        """P tiles over each stage's RoPE block in the no-swizzle K-major layout (``p_interleaved``).

        With the 128B swizzle a thread's 16 P stores need 16 xor-ed addresses, and the compiler
        rebuilt them every pair (~50 integer instructions on the softmax's chain, run 11's SASS).
        In the interleaved layout (8 x 16-byte core matrices, 128 contiguous bytes each) they are one
        base plus immediates, still free of bank conflicts (a warp's store covers whole core matrices).
        The bytes are free for P once the page's S is done, whatever layout K used there.
        """
        bf16 = cutlass.BFloat16
        atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_INTER, bf16)
        tile = cute.tile_to_shape(atom, (BLOCK_M, PAGE), order=(0, 1))
        # stage s's RoPE block: s * PAGE * D_QK elements from the ring's start, after D_V // 64 blocks
        first = cute.make_ptr(bf16, sKV.iterator.toint() + (D_V // 64) * PAGE * 64 * 2, cute.AddressSpace.smem,
                              assumed_align=1024)
        outer = tile.outer
        per_stage = cute.make_layout((*outer.shape, self.stages), stride=(*outer.stride, PAGE * D_QK))
        return cute.make_tensor(cute.recast_ptr(first, tile.inner), per_stage)
