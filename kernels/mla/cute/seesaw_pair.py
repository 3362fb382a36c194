"""v22_cute: v19_cute's seesaw split kernel whose splits merge in pairs through distributed shared memory.

Decode (b=32, 2 row blocks per sequence) runs 2 KV splits per (sequence, row block) to fill the
132 SMs, so v19_cute writes 2 fp32 partials (16.8 MB) and a second kernel merges them: 7.1 us of
combine plus the gap between the kernels, ~10% of the trial.  Here splits ``2i`` and ``2i + 1`` of
a (sequence, row block) are one 2-CTA cluster (grid z).  After both finished their pages:

1. cluster barrier: every warp of both CTAs is done with its shared memory (the producer warps
   arrive for this phase at the kernel's end, then exit);
2. rank k finishes O's columns of warpgroup k: the other warpgroup's threads store their
   normalised O fragment (128 fp32 each) and their rows' lse into the peer's shared memory
   (``st.shared::cluster``), thread ``t`` into slot ``t`` -- both CTAs partition O identically, so
   the peer's thread ``t`` of that warpgroup holds the same (row, column) elements.  64 KB cross
   each way at once instead of 128 KB one way;
3. cluster barrier (release / acquire), then warpgroup k of rank k merges in registers,
   ``O = w0 O0 + w1 O1`` with ``w_k = e^(lse_k - lse)``, ``lse = log(e^lse0 + e^lse1)`` (a split
   that saw no key has lse -inf and weighs 0), and stores its 256 columns: with 2 splits into the
   final bf16 output (rank 0 also the lse), with more into a partial per pair for the combine.

The exchange buffer overlays Q from the start of dynamic shared memory (65 KB; the mbarriers at
the end are untouched).  A shape with one split runs v19_cute's
kernel unchanged (no cluster).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from kforge_kernels.mla.cute.seesaw import WG, MlaSplitSm90SeesawOwnPEvict
from kforge_kernels.mla.cute.sm90_epilogue import SplitEpilogue
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, LN_2, _mn_view

LOG2_E = 1.4426950408889634


class MlaSplitSm90SeesawPair(MlaSplitSm90SeesawOwnPEvict):
    """v22_cute: v19_cute with each pair of KV splits merged inside a 2-CTA cluster (no combine for 2 splits)."""

    pair_splits = True
    #: where the halves of O cross: "dsmem" (fp32, v22_cute), "dsmem_bf16" (v23_cute), "global" (L2, v24_cute)
    exchange = "dsmem"

    @cute.jit
    def _epilogue(self, acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp, scale_log2):
        if cutlass.const_expr(not self.pair):
            SplitEpilogue._epilogue(self, acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp,
                                    scale_log2)
        else:
            self._pair_merge(acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp, scale_log2)

    @cute.jit
    def _seesaw_consumer(self, qk_mma, pv_mma, rs_mmas, tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter,
                         q_pipe, kv_pipe, sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2):
        # the global exchange buffer (v24_cute) arrives in the counter argument's place
        self._exchange_ws = mSem
        MlaSplitSm90SeesawOwnPEvict._seesaw_consumer(
            self, qk_mma, pv_mma, rs_mmas, tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter, q_pipe, kv_pipe,
            sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2)

    @cute.jit
    def _pair_merge(self, acc_O, tOgO, tScS_mn, row_max, total, m_block, bi, split, c, ctid, mLp, scale_log2):
        """Steps 1-3 of the module docstring for this consumer thread's two O rows."""
        f32 = cutlass.Float32
        xdt = cutlass.BFloat16 if cutlass.const_expr(self.exchange == "dsmem_bf16") else f32
        acc_O_mn = _mn_view(acc_O)
        n_rows = cute.size(acc_O_mn.shape[0])
        cols = acc_O_mn.shape[1]  # (column pair, 8-column block, 1): the sm90 C layout's columns
        # exchange buffer (xdt units): O element (r, j) of slot t at ((r * 32 + j // 2) * 128 + t) * 2 + j % 2
        # (a warp stores 256 contiguous bytes), then (fp32) the lse of row r of slot t
        o_words = n_rows * cute.size(cols) * WG
        lse_at = o_words * xdt.width // 32  # in fp32 units
        lse_own = cute.make_rmem_tensor(n_rows, f32)
        for r in cutlass.range_constexpr(n_rows):
            lse_own[r] = -cutlass.Float32.inf
            if total[r] != 0.0:
                lse_own[r] = (row_max[r] * scale_log2 + cute.math.log2(total[r], fastmath=True)) * LN_2
        rank = split % 2
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()  # both CTAs are done with their shared memory
        if c != rank:
            # the peer finishes these 256 columns: send them, normalised, with the rows' lse
            send_o, send_l = self._exchange_ptrs(xdt, lse_at, 1 - rank, True, bi, m_block, split)
            for r in cutlass.range_constexpr(n_rows):
                inv = 0.0 if total[r] == 0.0 else cute.arch.rcp_approx(total[r])
                acc_O_mn[r, None] = acc_O_mn[r, None].load() * inv
                sent = acc_O_mn[r, None]
                if cutlass.const_expr(xdt is not f32):
                    sent = cute.make_fragment_like(acc_O_mn[r, None], xdt)
                    sent.store(acc_O_mn[r, None].load().to(xdt))
                cute.autovec_copy(sent, self._slot_row(send_o, r, ctid, cols))
            # (a tensor in distributed shared memory takes copies only, no element stores)
            cute.autovec_copy(lse_own, cute.make_tensor(send_l + ctid, cute.make_layout(n_rows, stride=WG)))
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()  # the peer's stores are visible to this CTA
        if c == rank:
            recv_o, recv_l = self._exchange_ptrs(xdt, lse_at, rank, False, bi, m_block, split)
            recv = cute.make_fragment_like(acc_O_mn[0, None], xdt)
            for r in cutlass.range_constexpr(n_rows):
                cute.autovec_copy(self._slot_row(recv_o, r, ctid, cols), recv)
                lse_peer = cute.make_tensor(recv_l + (r * WG + ctid), cute.make_layout(1))[0]
                top = cute.arch.fmax(lse_own[r], lse_peer)
                if top == -cutlass.Float32.inf:
                    top = 0.0
                w_own = cute.math.exp2((lse_own[r] - top) * LOG2_E, fastmath=True)
                w_peer = cute.math.exp2((lse_peer - top) * LOG2_E, fastmath=True)
                denom = w_own + w_peer
                inv = 0.0 if denom == 0.0 else cute.arch.rcp_approx(denom)
                own = 0.0 if total[r] == 0.0 else cute.arch.rcp_approx(total[r])
                peer = recv.load() if cutlass.const_expr(xdt is f32) else recv.load().to(f32)
                acc_O_mn[r, None] = acc_O_mn[r, None].load() * (own * w_own * inv) + peer * (w_peer * inv)
                lse = -cutlass.Float32.inf
                if denom != 0.0:
                    lse = top + cute.math.log2(denom, fastmath=True) * LN_2
                if c == 0 and ctid % 4 == 0:
                    self._store_lse(mLp, lse, m_block * BLOCK_M + tScS_mn[r, 0][0], bi, split // 2)
            self._store_o(acc_O, tOgO, tScS_mn, m_block)

    def _exchange_ptrs(self, xdt, lse_at: int, to_rank, remote: bool, bi, m_block, split):
        """(O, lse) pointers of the exchange buffer CTA ``to_rank`` of the pair receives into.

        In shared memory (from the start of the dynamic allocation; ``remote``: the peer's, mapped
        through the cluster window) or, for the global exchange, in the workspace slot of this
        (sequence, row block, pair) and receiving rank.
        """
        f32 = cutlass.Float32
        if cutlass.const_expr(self.exchange == "global"):
            _, _, splits = cute.arch.grid_dim()
            per_rank = lse_at + 2 * WG  # O, then 2 rows of lse per slot
            pair_at = ((bi * self.m_blocks + m_block) * (splits // 2) + split // 2) * 2 * per_rank
            # per_rank is a multiple of 4 words: keep the 16-byte alignment for vector stores
            o_ptr = self._exchange_ws.iterator + cute.assume(pair_at + to_rank * per_rank, divby=4)
            return o_ptr, o_ptr + lse_at
        base = cute.arch.get_dyn_smem(xdt, alignment=1024)
        # the peer's rank in the cluster: with row-block multicast (v67_cute) the cluster is (row blocks, 1, 2),
        # ranked row block + cluster * (split % 2), and the peer is this row block's CTA of the other split
        peer = to_rank if cutlass.const_expr(self.cluster == 1) else to_rank * self.cluster + m_block % self.cluster
        if cutlass.const_expr(xdt is f32):
            o_ptr = cute.arch.map_dsmem_ptr(base, peer) if remote else base
            return o_ptr, o_ptr + lse_at
        lbase = cute.arch.get_dyn_smem(f32, alignment=1024) + lse_at
        if remote:
            return cute.arch.map_dsmem_ptr(base, peer), cute.arch.map_dsmem_ptr(lbase, peer)
        return base, lbase

    @staticmethod
    def _slot_row(base, r: int, slot, cols):
        """Row r of exchange slot ``slot`` as a tensor shaped like a fragment row: pairs contiguous."""
        off = cute.assume((r * (cute.size(cols) // 2) * WG + slot) * 2, divby=2)
        return cute.make_tensor(base + off, cute.make_layout(cols, stride=(1, 2 * WG, 0)))


class MlaSplitSm90SeesawPairBf16(MlaSplitSm90SeesawPair):
    """v23_cute: v22_cute with the exchanged halves of O in bf16 (32 KB each way instead of 64)."""

    exchange = "dsmem_bf16"


class MlaSplitSm90SeesawPairTmaO(MlaSplitSm90SeesawPairBf16):
    """v28_cute: v23_cute with O staged in shared memory and written by one TMA store per warpgroup."""

    tma_store_o = True


class MlaSplitSm90SeesawPairProv(MlaSplitSm90SeesawPairTmaO):
    """v30_cute: v28_cute with WG1's page-B softmax run against its own max before m0 arrives (``wg1_provisional``)."""

    wg1_provisional = True


class MlaSplitSm90SeesawPairProvFirst(MlaSplitSm90SeesawPairProv):
    """v31_cute: v30_cute with WG1 publishing P_B before it issues P_A V_AR (``wg1_publish_first``)."""

    wg1_publish_first = True


class MlaSplitSm90SeesawPairPInter(MlaSplitSm90SeesawPairTmaO):
    """v28_cute with P stored in the no-swizzle K-major layout (``p_interleaved``): its addresses are immediates."""

    p_interleaved = True


class MlaSplitSm90SeesawPairC3(MlaSplitSm90SeesawPairTmaO):
    """v28_cute with each page loaded as three 64 x 192 TMA boxes (three barriers, ``kv_chunks = 3``)."""

    kv_chunks = 3


class MlaSplitSm90SeesawPairC3Early(MlaSplitSm90SeesawPairC3):
    """v33_cute with WG0 giving page A back as soon as its P_A V_AL is done (``wg0_early_release``)."""

    wg0_early_release = True


class MlaSplitSm90SeesawPairMulticast(MlaSplitSm90SeesawPairC3Early):
    """v67_cute: v35_cute's paired kernel with the two row blocks of a split in one cluster as well: a cluster of
    (2 row blocks) x (the pair's 2 splits), each KV chunk loaded half by each row block's CTA and multicast to both.

    Each page then crosses from L2 to the SMs once per split instead of once per row block: decode's ~302 MB of
    L2-to-SM traffic halves, the traffic the ring probe (59.6 us with no math, run 11) says bounds the page loop.
    v21_cute multicast on v19_cute without pairs and paid the combine; here the pair merge stays.  The two row
    blocks run in lockstep (a slot is refilled once both have freed it): they do the same work on the same pages.
    Shapes with an odd row-block count keep the plain pair (``cluster_rows`` needs an even count)."""

    cluster_rows = 2


class MlaSplitSm90SeesawPairOwnChunks(MlaSplitSm90SeesawPairC3Early):
    """v37_cute: v35_cute with WG0 giving page A's last chunk back right after S_A (``release_unread``) and every
    page loaded, and read by S, last chunk first (``chunk_order``)."""

    release_unread = True
    chunk_order = (2, 0, 1)


class MlaSplitSm90SeesawPairOwnChunksSplit(MlaSplitSm90SeesawPairOwnChunks):
    """v38_cute: v37_cute's chunk order and early release only in the paired-split (decode) kernels, whose pages
    come from DRAM; the one-split (spec) kernel is v35_cute's, where v37_cute's order slowed page A (run 13)."""

    @property
    def release_unread(self) -> bool:  # type: ignore[override]
        return bool(self.pair)

    @property
    def chunk_order(self) -> tuple[int, ...]:  # type: ignore[override]
        return (2, 0, 1) if self.pair else ()


class MlaSplitSm90SeesawPairFreeA(MlaSplitSm90SeesawPairC3Early):
    """v39_cute: v35_cute with WG1 giving back page A's chunk it never reads right after barrier S0
    (``wg1_free_unread_a``)."""

    wg1_free_unread_a = True


class MlaSplitSm90SeesawPairM0First(MlaSplitSm90SeesawPairC3Early):
    """v40_cute: v35_cute with m0 published before P_A (``m0_first``)."""

    m0_first = True


class MlaSplitSm90SeesawPairFreeAM0(MlaSplitSm90SeesawPairFreeA):
    """v41_cute: v39_cute and v40_cute together."""

    m0_first = True


class MlaSplitSm90SeesawPairPvFirst(MlaSplitSm90SeesawPairC3Early):
    """v43_cute: v35_cute with WG0's P_A V_AL issued before P_A is stored for WG1 (``wg0_pv_first``)."""

    wg0_pv_first = True


class MlaSplitSm90SeesawPairM0PvFirst(MlaSplitSm90SeesawPairM0First):
    """v42_cute: v40_cute (m0 before P_A) with WG0's P_A V_AL issued before P_A is stored (``wg0_pv_first``)."""

    wg0_pv_first = True


class MlaSplitSm90SeesawPairC1(MlaSplitSm90SeesawPairTmaO):
    """v28_cute with one barrier per page (``kv_chunks = 1``): S waits for the whole page."""

    kv_chunks = 1


class MlaSplitSm90SeesawPairIlp(MlaSplitSm90SeesawPairTmaO):
    """v29_cute: v28_cute with the page softmax as one straight-line block over both rows (``softmax_ilp``)."""

    softmax_ilp = True


class MlaSplitSm90SeesawPairEarlyRelease(MlaSplitSm90SeesawPairBf16):
    """v26_cute: v23_cute with every KV block given back at each warpgroup's last use (``early_release``)."""

    early_release = True


class MlaSplitSm90SeesawPairVrFirst(MlaSplitSm90SeesawPairEarlyRelease):
    """v27_cute: v26_cute with WG1's P_A V_AR queued before WG0's P_A V_AL (``vr_first``)."""

    vr_first = True


class MlaSplitSm90SeesawPairL2(MlaSplitSm90SeesawPair):
    """v24_cute: v22_cute with the halves of O exchanged through an L2-resident global workspace."""

    exchange = "global"
