"""CuTe DSL MLA split kernel for Hopper: TMA + mbarrier pipeline, wgmma, warp specialisation.

Same work decomposition and numerics as ``_cute_sm80_dedup`` (64 folded query rows per CTA, one
KV split, online softmax in exp2, partial or direct epilogue), rebuilt on what sm_90 offers:

* 3 warpgroups.  WG0 is the producer: one warp issues TMA bulk copies (Q once, then each 64-row
  KV page, the page index read from the block table) into a 2-stage mbarrier pipeline; its
  registers are given back (``setmaxnreg``) to the two consumer warpgroups.
* Consumer WG ``c`` (c = 0, 1) owns the O columns ``[256c, 256c + 256)`` (64 x 256 fp32
  accumulators, 128 registers per thread) and the page tokens ``[32c, 32c + 32)`` of S:
  ``S_c = Q K_c^T`` is one m64n32 wgmma chain (K = 576, both operands in shared memory).  The
  row maxima are exchanged through shared memory, each WG writes its bf16 half of P into a
  64 x 64 shared tile, and ``O_c += P V_c`` is an m64n256 wgmma chain (K = 64 tokens) reading
  P and V from shared memory.  No QK^T work is duplicated (v1_cute computed it twice).
* Overlap inside each WG (FA3-style): page j+1's ``S`` and page j's ``P V`` are issued together,
  the softmax of page j+1 runs while ``P V`` still executes, then O is rescaled.
* V is the first 512 columns of the same page: its MN-major smem layout is built so it maps
  (dim, token) to exactly the bytes where the K-major layout put (token, dim) (both are
  128B-swizzled 64-element atoms stacked along the 64 tokens first), so one TMA load serves
  both GEMMs.

Named barriers (256 consumer threads): 1 = row maxima published, 2 = both WGs done reading P
(their ``P V`` completed), 3 = the new P is in shared memory.

The consumer warpgroups' code is in ``_cute_sm90_halfpage`` (a mixin), the output partition and
epilogue in ``_cute_sm90_epilogue`` (a mixin), the shared constants and trace-time helpers in
``_cute_sm90_parts``; ``_cute_seesaw`` reuses this CTA with another consumer.
"""

from __future__ import annotations

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass.tensor_utils import LayoutEnum
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync, warpgroup

from kforge_kernels.mla.cute.sm90_epilogue import SplitEpilogue
from kforge_kernels.mla.cute.sm90_halfpage import HalfPageConsumer
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, CONSUMERS, D_QK, D_V, HALF, PAGE, KvLoads
from kforge_kernels.mla.cute.probe import TraceProbe


class MlaSplitSm90(HalfPageConsumer, SplitEpilogue, TraceProbe, KvLoads):
    """Partial (or, with ``direct``, final) MLA attention over one KV split, 64 rows per CTA."""

    #: issue page j's P V before page j+1's S (v5_cute) instead of after it (v4_cute)
    pv_first = False
    #: one consumer warpgroup per page of a pair (``_cute_seesaw``) instead of half a page each
    seesaw = False
    #: staggered seesaw (``_cute_stagger``): own P from registers, pages loaded and released block
    #: by block in the order the warpgroups finish with them (v15_cute)
    stagger = False
    #: KV block loads carry the L2 evict-first hint (v16_cute, v19_cute)
    evict_first = False
    #: row-block CTAs of a (sequence, split) per cluster, each KV block loaded once and multicast to
    #: all of them (v21_cute); an instance falls back to 1 when its row blocks do not pair up
    cluster_rows = 1
    #: own P V as an rs-wgmma (``_cute_seesaw``, v18_cute)
    own_p_rs = False
    #: leading 64-dim blocks of Q each consumer warpgroup keeps in registers for an rs-wgmma QK^T (v20_cute)
    q_reg_blocks = 0
    #: columns of S one warpgroup computes per page (the QK^T wgmma's N)
    qk_cols = HALF
    #: TMA copies (each with its own full/empty barrier) per KV page: 1 = the whole 64 x 576
    #: page, 9 = 64 x 64 blocks, so a GEMM can start on a page's first block (v9_cute)
    kv_chunks = 1
    #: each KV block reloaded by the consumer warpgroup that reads it last, not by the producer (v51_cute,
    #: ``_cute_seesaw_rr``): the producer loads the first pass of the ring only
    reader_reloads = False
    #: the order a page's chunks are loaded (and S reads them) in; () = 0, 1, ... (v37_cute: the one freed first)
    chunk_order: tuple[int, ...] = ()
    #: the order page B's chunks (ring stage 1) are loaded and read by S in, when it differs from page A's; () =
    #: page A's (v49_cute: page B's chunks that its P_B V_BL does not read, freed first, first); needs
    #: ``pair_load_order``
    page_b_order: tuple[int, ...] = ()
    #: the order the producer loads a pair's chunks in, as (stage, chunk) across both pages (page A = stage 0), by
    #: when the consumers free them; () = page by page (v49/v50_cute: page B's early chunks before page A's late)
    pair_load_order: tuple[tuple[int, int], ...] = ()
    #: skip O's rescale for a row whose max did not move (v6_cute; exact)
    lazy_rescale = False
    #: split partials stored as bf16 instead of fp32 (v6_cute; the host allocates them)
    partial_bf16 = False
    #: the last CTA of a (sequence, row block) to finish merges all splits (v10_cute): no combine launch
    fused_combine = False
    #: pages the producer of row block 0 prefetches into L2 ahead of its TMA loads (v13_cute)
    l2_prefetch_pages = 0
    #: let the dependent combine grid launch at once (programmatic dependent launch, v14_cute)
    pdl_trigger = False
    #: the kind may run its splits in 2-CTA clusters that merge in shared memory (``_cute_seesaw_pair``)
    pair_splits = False
    #: direct outputs: O staged in shared memory and written by one TMA store per warpgroup (v28_cute)
    tma_store_o = False
    #: the seesaw's page softmax as one straight-line block over both rows (v29_cute)
    softmax_ilp = False
    #: one CTA per SM loops over the (row block, sequence) tiles (``_cute_persistent``; direct outputs only)
    persistent = False
    #: Q's buffer after the KV ring in shared memory, not at its start, when the persistent loop runs: with Q at
    #: offset 0 and its TMA load inside the producer's loop, ptxas held the shared-memory base in a vector
    #: register for the whole kernel and moved it back (R2UR) before the consumers' barrier waits and wgmma
    #: descriptors, 10 and 16 times per pair (v36_cute; v35_cute's pair loops have none)
    q_after_kv = False
    #: each CTA takes its tile and page range from a host-built work table after the split counters in the counter
    #: argument, the grid is that table's length (the ``splits`` argument) and a split's partial sits in slot
    #: ``slot`` of its tile (``_cute_seesaw_tail``, v54_cute)
    work_table = False
    #: the persistent loop gives Q's buffer back after each warpgroup's last S GEMM of a tile (not after the
    #: epilogue) and stores O from registers (no staging in Q's buffer), so the producer loads the next tile's Q
    #: while the last pair's P V GEMMs and the epilogue run (v47_cute)
    loop_q_early = False
    #: a merging kernel (``fused_combine``) writes the merged O through shared memory and one TMA store per
    #: warpgroup, like the direct epilogue (v56_cute), not from registers
    merge_via_tma = False
    #: a redo launch: a tile runs only when ``_tile_flagged`` says an earlier kernel left it poisoned (v57_cute)
    redo_guard = False

    @property
    def looping(self) -> bool:
        """The persistent loop runs: direct outputs from one split (a merging pair keeps one tile per CTA)."""
        return self.persistent and self.direct and not self.pair

    def __init__(self, s: int, h: int, stages: int = 2, direct: bool = False, paired: bool = False):
        if stages != 2:
            raise ValueError(f"the sm90 kernel has room for 2 KV stages only (Q + 2 pages + P = 224 KB), got {stages}")
        self.s, self.h, self.stages, self.direct = s, h, stages, direct
        self.rows = s * h
        self.m_blocks = math.ceil(self.rows / BLOCK_M)
        self.rows_pad = self.m_blocks * BLOCK_M
        self.threads = 384
        self.regs_producer, self.regs_consumer = 40, 232
        # CTAs per cluster along the row blocks (TMA multicast of each KV block): only when they pair up
        self.cluster = self.cluster_rows if self.m_blocks % self.cluster_rows == 0 else 1
        if paired and not self.pair_splits:
            raise ValueError(f"{type(self).__name__} cannot run its splits as merging pairs")
        # splits 2i and 2i + 1 form a cluster (grid z) and merge in shared memory (v22_cute)
        self.pair = paired

    @cute.jit
    def __call__(
        self,
        q_ptr: cute.Pointer,
        kv_ptr: cute.Pointer,
        bt_ptr: cute.Pointer,
        lens_ptr: cute.Pointer,
        op_ptr: cute.Pointer,
        lp_ptr: cute.Pointer,
        out_ptr: cute.Pointer,
        lse_ptr: cute.Pointer,
        sem_ptr: cute.Pointer,
        b: cutlass.Int32,
        num_blocks: cutlass.Int32,
        max_blocks: cutlass.Int32,
        splits: cutlass.Int32,
        scale_log2: cutlass.Float32,
        stream: cuda.CUstream,
    ):
        bf16, f32 = cutlass.BFloat16, cutlass.Float32
        # Q as (row, dim, batch), KV as (token, dim, page): the TMA boxes are (64, 576) tiles
        mQ = cute.make_tensor(q_ptr, cute.make_layout((self.rows, D_QK, b), stride=(D_QK, 1, self.rows * D_QK)))
        mKV = cute.make_tensor(kv_ptr, cute.make_layout((PAGE, D_QK, num_blocks), stride=(D_QK, 1, PAGE * D_QK)))
        mBT = cute.make_tensor(bt_ptr, cute.make_ordered_layout((b, max_blocks), order=(1, 0)))
        mLens = cute.make_tensor(lens_ptr, cute.make_layout(b))
        if cutlass.const_expr(self.direct):
            mOp = cute.make_tensor(op_ptr, cute.make_ordered_layout((b, self.rows, D_V), order=(2, 1, 0)))
            mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((b, self.h, self.s), order=(2, 1, 0)))
        elif cutlass.const_expr(self.work_table):
            mOp, mLp = self._table_partials(op_ptr, lp_ptr, b)
        else:
            mOp = cute.make_tensor(
                op_ptr, cute.make_ordered_layout((splits, b, self.rows_pad, D_V), order=(3, 2, 1, 0))
            )
            mLp = cute.make_tensor(lp_ptr, cute.make_ordered_layout((splits, b, self.rows_pad), order=(2, 1, 0)))
        # used only by a kernel that merges the splits itself (fused_combine): the final outputs and
        # one arrival counter per (sequence, row block); other kinds get placeholders
        mOut = cute.make_tensor(out_ptr, cute.make_ordered_layout((b, self.rows, D_V), order=(2, 1, 0)))
        mLse = cute.make_tensor(lse_ptr, cute.make_ordered_layout((b, self.h, self.s), order=(2, 1, 0)))
        mSem = cute.make_tensor(sem_ptr, cute.make_layout(b * self.m_blocks))

        sQ_layout = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (BLOCK_M, PAGE, D_QK), bf16, 1)
        # K-major page: 128B atoms of (8 tokens x 64 dims) stacked over the 64 tokens, then the 9 dim blocks
        sKV_layout = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (BLOCK_M, PAGE, D_QK), bf16, self.stages)
        # MN-major view of the same bytes, (dim, token): 128B atoms of (64 dims x 8 tokens) stacked
        # over the tokens first -> identical offsets (checked by _cute_compilecheck's layout test)
        sV_layout = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, (BLOCK_M, D_QK, PAGE), bf16, self.stages)
        # P: 64B-swizzled K-major atoms (8 rows x 32 tokens); WG c's half starts 2048 elements in,
        # on an atom boundary (a 32-column offset inside a 128B atom is miscompiled by DSL 4.8.1)
        p_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW64, bf16)
        sP_layout = cute.tile_to_shape(p_atom, (BLOCK_M, PAGE), order=(0, 1))
        red_layout = cute.make_layout((2, 128, 2), stride=(256, 2, 1))

        tma_q, mQt = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), mQ, cute.slice_(sQ_layout, (None, None, 0)), (BLOCK_M, D_QK)
        )
        # one TMA box per KV chunk: (64 tokens, 576 / kv_chunks dims), the K-major layout of one block
        kv_cols = D_QK // self.kv_chunks
        sKc_layout = cute.slice_(
            sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (BLOCK_M, PAGE, kv_cols), bf16, 1), (None, None, 0)
        )
        # in a cluster each CTA loads 1/cluster of a block and multicasts it to all of them
        kv_op = cpasync.CopyBulkTensorTileG2SMulticastOp() if self.cluster > 1 else cpasync.CopyBulkTensorTileG2SOp()
        tma_kv, mKVt = cpasync.make_tiled_tma_atom(kv_op, mKV, sKc_layout, (PAGE, kv_cols), num_multicast=self.cluster)
        self.q_bytes = cute.size_in_bytes(bf16, cute.slice_(sQ_layout, (None, None, 0)))
        self.kv_bytes = cute.size_in_bytes(bf16, sKc_layout)

        # 1024-aligned tiles first, small items last: 73728 + 147456 + 8192 + 2048 + 48 = 231472 B
        # of the 232448 B (227 KB) a CTA may use -- no room for a third KV stage
        @cute.struct
        class SmemQFirst:
            sQ: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sQ_layout)], 1024]
            sKV: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sKV_layout)], 1024]
            sP: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sP_layout)], 1024]
            sRed: cute.struct.Align[cute.struct.MemRange[f32, cute.cosize(red_layout)], 16]
            q_bar: cute.struct.MemRange[cutlass.Int64, 2]
            kv_bar: cute.struct.MemRange[cutlass.Int64, 2 * self.stages * self.kv_chunks]

        @cute.struct
        class SmemQLast:  # the same fields, Q's buffer after the ring (see q_after_kv)
            sKV: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sKV_layout)], 1024]
            sQ: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sQ_layout)], 1024]
            sP: cute.struct.Align[cute.struct.MemRange[bf16, cute.cosize(sP_layout)], 1024]
            sRed: cute.struct.Align[cute.struct.MemRange[f32, cute.cosize(red_layout)], 16]
            q_bar: cute.struct.MemRange[cutlass.Int64, 2]
            kv_bar: cute.struct.MemRange[cutlass.Int64, 2 * self.stages * self.kv_chunks]

        # the pair merge's exchange buffer (_cute_seesaw_pair) assumes Q's buffer at the start; a looping
        # kernel never merges pairs
        Smem = SmemQLast if self.q_after_kv and self.looping else SmemQFirst

        o_store = ()
        if cutlass.const_expr(self.o_via_tma):
            o_store = self._tma_store_args(op_ptr, b)  # O leaves through Q's buffer and a TMA store (v28_cute)
        elif cutlass.const_expr(self.merge_via_tma):
            o_store = self._tma_store_args(out_ptr, b)  # the merged O the same way, into the final output
        kern = self.kernel(
            tma_q, mQt, tma_kv, mKVt, mBT, mLens, mOp, mLp, mOut, mLse, mSem, scale_log2,
            sQ_layout, sKV_layout, sV_layout, sP_layout, red_layout, Smem, *o_store,
        )
        cluster_kw = {"cluster": (self.cluster, 1, 1)} if self.cluster > 1 else {}
        # a pair of splits is a cluster along z; with row-block multicast too, (row blocks, 1, 2) (v67_cute)
        cluster_kw = {"cluster": (self.cluster, 1, 2)} if self.pair else cluster_kw
        grid = (self.m_blocks, b, splits)
        if cutlass.const_expr(self.looping):
            grid = (cutlass.min(self.m_blocks * b, self.max_ctas), 1, 1)
        if cutlass.const_expr(self.work_table):
            grid = (splits, 1, 1)  # one CTA per work item
            if cutlass.const_expr(not self.direct):
                cluster_kw = {"use_pdl": True}  # the tail grid may start beside the direct grid's last wave
        kern.launch(grid=grid, block=(self.threads, 1, 1), stream=stream, min_blocks_per_mp=1, **cluster_kw)

    @cute.kernel
    def kernel(
        self,
        tma_q: cute.CopyAtom,
        mQt: cute.Tensor,
        tma_kv: cute.CopyAtom,
        mKVt: cute.Tensor,
        mBT: cute.Tensor,
        mLens: cute.Tensor,
        mOp: cute.Tensor,
        mLp: cute.Tensor,
        mOut: cute.Tensor,
        mLse: cute.Tensor,
        mSem: cute.Tensor,
        scale_log2: cutlass.Float32,
        sQ_layout: cute.ComposedLayout,
        sKV_layout: cute.ComposedLayout,
        sV_layout: cute.ComposedLayout,
        sP_layout: cute.ComposedLayout,
        red_layout: cute.Layout,
        Smem: cutlass.Constexpr,
        o_tma: cute.CopyAtom = None,
        mOt: cute.Tensor = None,
        sO_layout: cute.ComposedLayout = None,
    ):
        args = (tma_q, mQt, tma_kv, mKVt, mBT, mLens, mOp, mLp, mOut, mLse, mSem, scale_log2, sQ_layout, sKV_layout,
                sV_layout, sP_layout, red_layout, Smem, o_tma, mOt, sO_layout)
        if cutlass.const_expr(self.redo_guard):
            # a redo launch (_cute_seesaw_stale): only the tiles an earlier kernel flagged run, the rest exit
            m_block, bi, split = cute.arch.block_idx()
            if self._tile_flagged(mLp, m_block, bi, split):
                self._kernel_body(*args)
        else:
            self._kernel_body(*args)

    @cute.jit
    def _kernel_body(self, tma_q, mQt, tma_kv, mKVt, mBT, mLens, mOp, mLp, mOut, mLse, mSem, scale_log2, sQ_layout,
                     sKV_layout, sV_layout, sP_layout, red_layout, Smem, o_tma, mOt, sO_layout):
        """The kernel proper (``kernel`` adds the optional redo guard in front)."""
        bf16, f32 = cutlass.BFloat16, cutlass.Float32
        # The tiled MMAs are built here, not passed in: their accumulate flag is set inside loop
        # bodies, and a kernel argument's state is read again by the launch (escaping value).
        kmaj, mnmaj = warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.MN
        # S_c = Q K_c^T: m64 n32, both operands K-major in smem
        qk_mma = sm90_utils.make_trivial_tiled_mma(bf16, bf16, kmaj, kmaj, f32, (1, 1, 1), (BLOCK_M, self.qk_cols))
        # O_c += P V_c: m64 n256, P K-major (tokens contiguous), V MN-major (dims contiguous)
        pv_mma = sm90_utils.make_trivial_tiled_mma(bf16, bf16, kmaj, mnmaj, f32, (1, 1, 1), (BLOCK_M, D_V // 2))
        qk_mma.set(warpgroup.Field.ACCUMULATE, True)
        pv_mma.set(warpgroup.Field.ACCUMULATE, True)
        pv_rs, qk_rs = None, None
        if cutlass.const_expr(self.stagger or self.own_p_rs):
            # O_c += P V_c with P from registers (the warpgroup's own page): no smem round trip
            pv_rs = sm90_utils.make_trivial_tiled_mma(bf16, bf16, kmaj, mnmaj, f32, (1, 1, 1), (BLOCK_M, D_V // 2),
                                                      a_source=warpgroup.OperandSource.RMEM)
            pv_rs.set(warpgroup.Field.ACCUMULATE, True)
        if cutlass.const_expr(self.q_reg_blocks > 0):
            # S += Q K^T over the first q_reg_blocks 64-dim blocks with Q from registers
            qk_rs = sm90_utils.make_trivial_tiled_mma(bf16, bf16, kmaj, kmaj, f32, (1, 1, 1), (BLOCK_M, self.qk_cols),
                                                      a_source=warpgroup.OperandSource.RMEM)
            qk_rs.set(warpgroup.Field.ACCUMULATE, True)
        tidx, _, _ = cute.arch.thread_idx()
        m_block, bi, split = cute.arch.block_idx()
        _, _, splits = cute.arch.grid_dim()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = cute.arch.make_warp_uniform(tidx // 128)

        if cutlass.const_expr(self.work_table):
            m_block, bi, split, p_first, p_last = self._work_item(m_block, mLens, mSem)
        t = mLens[bi]
        n_pages = (t + PAGE - 1) // PAGE
        chunk = (n_pages + splits - 1) // splits
        p_begin = split * chunk
        p_end = cutlass.min(p_begin + chunk, n_pages)
        if cutlass.const_expr(self.work_table):
            p_begin = cutlass.min(p_first, n_pages)  # a table's range is clamped to the sequence's pages
            p_end = cutlass.min(p_last, n_pages)
        n_iter = cutlass.max(p_end - p_begin, 0)

        smem = utils.SmemAllocator()
        st = smem.allocate(Smem)
        q_pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.q_bar.data_ptr(), num_stages=1,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMERS // 32),
            tx_count=self.q_bytes, defer_sync=True,
        )
        # a block's empty barrier counts the consumer warps of every CTA it is multicast to
        cluster_kw = {"cta_layout_vmnk": cute.make_layout((1, self.cluster, 1, 1))} if self.cluster > 1 else {}
        if cutlass.const_expr(self.cluster > 1 and self.pair):
            # (row blocks) x (the pair's 2 splits): a block is multicast to, and freed by, its own split's row
            # blocks only (the CTAs that share mode n), never the other split's, which reads other pages
            cluster_kw = {"cta_layout_vmnk": cute.make_layout((1, self.cluster, 2, 1)), "mcast_mode_mn": (0, 1)}
        kv_pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.kv_bar.data_ptr(), num_stages=self.stages * self.kv_chunks,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMERS // 32 * self.cluster),
            tx_count=self.kv_bytes, defer_sync=True, **cluster_kw,
        )
        cta_rank = 0
        if cutlass.const_expr(self.cluster > 1):
            cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
            if cutlass.const_expr(self.pair):
                # rank = row block + cluster * (split % 2): the TMA partition takes the rank among the row blocks,
                # and each load goes to this split's row blocks (``_kv_copy``)
                cta_rank = cta_rank % self.cluster
                self._mcast_mask = cutlass.Int16(((1 << self.cluster) - 1) << (self.cluster * (split % 2)))
        sQ = st.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sKV = st.sKV.get_tensor(sKV_layout.outer, swizzle=sKV_layout.inner)
        sV = cute.make_tensor(cute.recast_ptr(sKV.iterator, sV_layout.inner), sV_layout.outer)
        sP = st.sP.get_tensor(sP_layout.outer, swizzle=sP_layout.inner)
        self._sP = sP  # (trace time) the 8 KB P tile, for a seesaw kind that keeps P_B there (v49_cute)
        sRed = st.sRed.get_tensor(red_layout)

        # TMA partitions: (TMA, rest...) views of the gmem coordinate tensors and smem stages
        gQ = cute.flat_divide(mQt, (BLOCK_M, D_QK))  # (64, 576, m_blocks, 1, b)
        tQsQ, tQgQ = cpasync.tma_partition(
            tma_q, 0, cute.make_layout(1), cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2)
        )
        # KV chunk c of stage s is pipeline stage s * kv_chunks + c (the flat index of (1, c, s))
        kv_cols = D_QK // self.kv_chunks
        sKVc = cute.group_modes(cute.flat_divide(sKV, (PAGE, kv_cols)), 2, 5)  # (64, kv_cols, (1, chunks, stages))
        gKV = cute.flat_divide(mKVt, (PAGE, kv_cols))  # (64, kv_cols, 1, chunks, num_blocks)
        tKsK, tKgK = cpasync.tma_partition(
            tma_kv, cta_rank, cute.make_layout(self.cluster), cute.group_modes(sKVc, 0, 2), cute.group_modes(gKV, 0, 2)
        )
        self._kv_reload = (tma_kv, tKgK, tKsK, mBT, bi)  # (trace time) for consumers that reload KV (v51_cute)

        if cutlass.const_expr(o_tma is not None):
            # the TMA store of O (v28_cute): its atom, tensor and the staging tile over Q's buffer
            self._o_store = (o_tma, mOt, cute.make_tensor(cute.recast_ptr(sQ.iterator, sO_layout.inner), sO_layout.outer))

        cute.arch.mbarrier_init_fence()
        if cutlass.const_expr(self.cluster > 1):
            # the other CTAs' barriers must be initialised before a multicast or a remote arrive reaches them
            cute.arch.cluster_arrive_relaxed()
            cute.arch.cluster_wait()
        else:
            cute.arch.sync_threads()
        if cutlass.const_expr(self.pdl_trigger):
            # every CTA of this grid is resident once all have passed here, so the combine grid's
            # CTAs (which wait for this grid's completion) cannot take an SM a split CTA needs
            cute.arch.griddepcontrol_launch_dependents()

        if cutlass.const_expr(self.looping):
            # one CTA per SM walks the tiles (_cute_persistent); every per-tile value above is unused
            self._persistent_cta(tidx, wg, warp_idx, tma_q, tQgQ, tQsQ, tma_kv, tKgK, tKsK, q_pipe, kv_pipe, mBT, mLens,
                                 qk_mma, pv_mma, (pv_rs, qk_rs), sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem,
                                 scale_log2)
        elif wg == 0:
            # ---------------- producer ----------------------------------------------------
            cute.arch.setmaxregister_decrease(self.regs_producer)
            if warp_idx == 0:
                cpasync.prefetch_descriptor(tma_q)
                cpasync.prefetch_descriptor(tma_kv)
                q_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
                q_pipe.producer_acquire(q_state)
                cute.copy(tma_q, tQgQ[(None, m_block, 0, bi)], tQsQ[(None, 0)],
                          tma_bar_ptr=q_pipe.producer_get_barrier(q_state))
                if cutlass.const_expr(self.stagger):
                    self._produce_pairs(tma_kv, tKgK, tKsK, kv_pipe, mBT, bi, p_begin, p_end, n_iter)
                else:
                    kv_state = pipeline.make_pipeline_state(
                        pipeline.PipelineUserType.Producer, self.stages * self.kv_chunks
                    )
                    if cutlass.const_expr(self.l2_prefetch_pages > 0):
                        for i in cutlass.range_constexpr(1, self.l2_prefetch_pages):
                            self._prefetch_page(tma_kv, tKgK, mBT, bi, m_block, p_begin + i, p_end)
                    if cutlass.const_expr(self.pair_load_order):
                        self._kv_pairs_in_order(tma_kv, tKgK, tKsK, kv_pipe, mBT, bi, p_begin, p_end, n_iter, mSem)
                    else:
                        self._load_orders()  # (trace time) refuses an order the page-by-page loads cannot follow
                        # reader_reloads (v51_cute): the producer loads the first pass only; the consumers reload
                        p_stop = cutlass.min(p_end, p_begin + self.stages) if self.reader_reloads else p_end
                        for p in cutlass.range(p_begin, p_stop, unroll=1):
                            page = mBT[bi, p]
                            if cutlass.const_expr(self.l2_prefetch_pages > 0):
                                self._prefetch_page(tma_kv, tKgK, mBT, bi, m_block, p + self.l2_prefetch_pages,
                                                    p_end)
                            if cutlass.const_expr(self.chunk_order):
                                self._kv_page_in_order(tma_kv, tKgK, tKsK, kv_pipe, page, p - p_begin, mSem)
                            for j in cutlass.range_constexpr(0 if self.chunk_order else self.kv_chunks):
                                kv_pipe.producer_acquire(kv_state)
                                if cutlass.const_expr(self.trace and j in (0, self.kv_chunks - 1)):
                                    self._slot_free(mSem, p - p_begin, j > 0)  # the page's first / last slot came free
                                self._kv_copy(tma_kv, tKgK[(None, 0, j, page)], tKsK[(None, kv_state.index)],
                                              kv_pipe.producer_get_barrier(kv_state))
                                kv_state.advance()
        else:
            # ---------------- consumers ---------------------------------------------------
            cute.arch.setmaxregister_increase(self.regs_consumer)
            if cutlass.const_expr(self.stagger):
                self._stagger_consumer(qk_mma, pv_mma, pv_rs, tidx, wg, m_block, bi, split, t, p_begin, p_end,
                                       n_iter, q_pipe, kv_pipe, sQ, sKV, sV, sP, sRed, mOp, mLp, scale_log2)
            elif cutlass.const_expr(self.seesaw):
                # v8_cute: one warpgroup per page of a pair (see _cute_seesaw)
                self._seesaw_consumer(qk_mma, pv_mma, (pv_rs, qk_rs), tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter,
                                      q_pipe, kv_pipe, sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2)
            else:
                self._half_page_consumer(qk_mma, pv_mma, tidx, wg, m_block, bi, split, t, p_begin, n_iter,
                                         q_pipe, kv_pipe, sQ, sKV, sV, sP, sRed, mOp, mLp, scale_log2)
        if cutlass.const_expr(self.cluster > 1 or self.pair):
            # no CTA may exit while a peer can still multicast into it or arrive on its empty barriers
            # (pairs: the producer's arrival counts for the consumers' first merge barrier)
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()
        if cutlass.const_expr(self.work_table and not self.direct):
            # the tail grid starts early, beside the direct grid's last wave (programmatic dependent launch); its
            # last CTA, which starts after every other has an SM, waits for the direct grid, so the tail grid ends
            # after it and the stream's next work sees both (_cute_seesaw_tail).  Not every CTA: a short first
            # piece that waited would hold its SM from a second piece.
            x, _, _ = cute.arch.block_idx()
            n_items, _, _ = cute.arch.grid_dim()
            if x == n_items - 1:
                cute.arch.griddepcontrol_wait()


class MlaSplitSm90PvFirst(MlaSplitSm90):
    """v5_cute's schedule: P V of page j before S of page j+1, so each KV stage is freed early."""

    pv_first = True


class MlaSplitSm90Lazy(MlaSplitSm90PvFirst):
    """v6_cute: v5_cute's schedule + exact lazy O rescale + bf16 split partials."""

    lazy_rescale = True
    partial_bf16 = True


class MlaSplitSm90Bf16Partials(MlaSplitSm90PvFirst):
    """v7_cute: v5_cute's schedule + bf16 split partials (no lazy rescale: v6_cute measured it slower)."""

    partial_bf16 = True
