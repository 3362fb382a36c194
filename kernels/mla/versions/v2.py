"""v2: v1 plus split-KV, so a small batch still fills the 132 SMs.

v1 launches ``b * ceil(s*h / BLOCK_H)`` CTAs: 64 for the decode trial (b=32, h=128, s=1), half
the machine, each streaming a whole 4096-token sequence.  v2 adds a split axis: split ``i`` of
a sequence walks pages ``[i*pps, (i+1)*pps)`` with ``pps = ceil(pages / NUM_SPLITS)`` computed per
sequence in the kernel (lengths differ), and writes its normalised partial output (float32) and
log2-denominator to a workspace; ``_cutile_combine`` merges the splits with weights
``2^(lse2_i - max)``.  The split count is chosen on the host from ``b``, the row tiles and
``block_table.shape[1]`` (an upper bound of the pages: no device sync to read the lengths).
"""

from __future__ import annotations

import math
from typing import Any

from kforge_kernels.mla.cutile import combine as comb
from kforge_kernels.mla.cutile import common as cc
from kforge_kernels.mla.cutile import prepare as _cutile_prepare

LANGUAGE = "cutile-dsl"
PARENT = "v1"
DESCRIPTION = "cuTile: v1 + split-KV grid axis (fp32 partials to a workspace) + cuTile combine kernel"
CONFIG: dict[str, Any] = {
    "BLOCK_H": 64,  # folded query rows per CTA
    "NUM_SPLITS": None,  # None: chosen from b, row tiles and max pages to fill the SMs
    "WAVES": 1.0,  # target CTA waves when choosing the split count
    "MIN_PAGES": 4,  # never split finer than this many 64-row pages
    "COMBINE_ROWS": 16,  # rows per CTA of the combine kernel
    "OCCUPANCY": None,  # compiler hint for the split kernel
    "NUM_WORKER_WARPS": 8,  # compiler hint: two compute warp groups share the 64x512 fp32 accumulator
}

try:
    import cuda.tile as ct
except ImportError:  # pragma: no cover - depends on the machine
    ct = None

if ct is not None:
    ConstInt = ct.Constant[int]

    @ct.kernel
    def mla_v2_split_kernel(Q, KV, BT, SEQ, OP, LP, qk_scale_log2: float, S: int, H: int, NS: int,
                            MB: int,
                            BH: ConstInt, DV: ConstInt, DR: ConstInt, PG: ConstInt):
        rt = ct.bid(0)
        bi = ct.bid(1)
        sp = ct.bid(2)
        t = ct.load(SEQ, (bi,), shape=())
        zero = ct.PaddingMode.ZERO
        q = ct.load(Q, (bi, rt, 0), shape=(1, BH, DV), padding_mode=zero).reshape((BH, DV))
        qr = ct.load(Q, (bi, rt, DV // DR), shape=(1, BH, DR), padding_mode=zero).reshape((BH, DR))

        rows = rt * BH + ct.arange(BH, dtype=ct.int32)
        limit = ct.minimum(t - S + rows // H, t - 1)[:, None]
        cols = ct.arange(PG, dtype=ct.int32)[None, :]

        m_i = ct.full((BH, 1), -1.0e30, dtype=ct.float32)
        l_i = ct.zeros((BH, 1), dtype=ct.float32)
        acc = ct.zeros((BH, DV), dtype=ct.float32)

        n_pages = (t + PG - 1) // PG
        pps = (n_pages + NS - 1) // NS
        start = sp * pps
        end = ct.minimum(start + pps, n_pages)
        n_full = (t - S + 1) // PG
        for j in range(start, end):
            page = ct.load(BT, (bi * MB + j,), shape=())  # BT is the flat [b * max_blocks] table
            kt = ct.load(KV, (page, 0, 0), shape=(1, DV, PG), order=(0, 2, 1)).reshape((DV, PG))
            kr = ct.load(KV, (page, DV // DR, 0), shape=(1, DR, PG), order=(0, 2, 1)).reshape((DR, PG))
            sc = ct.zeros((BH, PG), dtype=ct.float32)
            sc = ct.mma(q, kt, sc)
            sc = ct.mma(qr, kr, sc)
            sc = sc * qk_scale_log2
            if j >= n_full:
                sc = ct.where((j * PG + cols) <= limit, sc, -math.inf)
            m_new = ct.maximum(m_i, ct.max(sc, axis=1, keepdims=True))
            p = ct.exp2(sc - m_new, flush_to_zero=True)
            alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.load(KV, (page, 0, 0), shape=(1, PG, DV)).reshape((PG, DV))
            acc = ct.mma(p.astype(ct.bfloat16), v, acc * alpha)
            m_i = m_new

        # a split with no visible key (short sequence, many splits) writes o = 0, lse2 = -inf
        l_safe = ct.where(l_i > 0.0, l_i, 1.0)
        o = acc / l_safe
        ct.store(OP, (bi, sp, rt, 0), o.astype(OP.dtype).reshape((1, 1, BH, DV)))
        lse2 = m_i + ct.log2(l_i)
        ct.store(LP, (bi, sp, rt), lse2.reshape((1, 1, BH)))


def pick_splits(b: int, s: int, h: int, max_pages: int, cfg: dict[str, Any], sms: int = cc.H200_SMS) -> int:
    """The split count this version launches for a shape (pure; the CPU tests check it)."""
    if cfg.get("NUM_SPLITS"):
        return max(1, min(int(cfg["NUM_SPLITS"]), max_pages))
    tiles = cc.row_blocks(s * h, int(cfg["BLOCK_H"]))
    return cc.choose_splits(b, tiles, max_pages, sms, waves=float(cfg["WAVES"]), min_pages=int(cfg["MIN_PAGES"]))


def supports(params: dict[str, int]) -> str | None:
    return None


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    import torch

    cfg = cc.merged_config(CONFIG, config)
    shp = cc.check_shapes(q, kv_cache, block_table, cache_seqlens, out, lse)
    bh = int(cfg["BLOCK_H"])
    cc.check_block_h(bh)
    if ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    ns = pick_splits(shp.b, shp.s, shp.h, shp.max_pages, cfg, cc.sm_count(cc.device_index(q)))
    q3 = q.view(shp.b, shp.rows, cc.D_QK)
    o3 = out.view(shp.b, shp.rows, cc.D_V)
    o_part = torch.empty((shp.b, ns, shp.rows, cc.D_V), dtype=torch.float32, device=q.device)
    l_part = torch.empty((shp.b, ns, shp.rows), dtype=torch.float32, device=q.device)
    kernel = cc.with_hints(mla_v2_split_kernel, occupancy=cfg["OCCUPANCY"],
                           num_worker_warps=cfg["NUM_WORKER_WARPS"])
    grid = (cc.row_blocks(shp.rows, bh), shp.b, ns)
    cc.launch(grid, kernel, (q3, kv_cache, block_table.view(-1), cache_seqlens, o_part, l_part,
                             float(softmax_scale) * cc.LOG2E, shp.s, shp.h, ns, shp.max_pages,
                             bh, cc.D_V, cc.D_ROPE, cc.PAGE))
    comb.combine(o_part, l_part, o3, lse, shp.h, rows_per_cta=int(cfg["COMBINE_ROWS"]))
    return out, lse


# compile every launch of a shape outside the shared GPU's lock (xdist workers): see _cutile_prepare
prepare = _cutile_prepare.preparer(run)
