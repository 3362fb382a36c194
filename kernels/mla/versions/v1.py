"""v1: the straightforward cuTile MLA decode kernel -- one CTA per (row tile, sequence).

The ``s*h`` query rows of a sequence are folded into one row axis (row ``r`` is draft token
``r // h``, head ``r % h``) so one KV page feeds ``BLOCK_H`` rows at once.  The CTA walks the
sequence's pages through ``block_table`` (64 rows each, the page size), computes
``S = Q[:, :512] K[:, :512]^T + Q[:, 512:] K[:, 512:]^T`` (cuTile tiles are powers of two, so the
576-dim dot product is two MMAs), keeps an online softmax in float32 with ``exp2`` and the scale
folded in, and accumulates ``P V`` with the first 512 dims of the same page.  Pages wholly below
every row's causal limit run without a mask; only the last one or two pages are masked per row
(limit ``t - s + r // h``), which also masks the tail of the last page.
"""

from __future__ import annotations

from typing import Any

from kforge_kernels.mla.cutile import common as cc
from kforge_kernels.mla.cutile import prepare as _cutile_prepare

LANGUAGE = "cutile-dsl"
PARENT = "v0"
DESCRIPTION = "cuTile: one CTA per (sequence, BLOCK_H folded s*h rows), paged KV loop, online softmax"
CONFIG: dict[str, Any] = {
    "BLOCK_H": 64,  # folded query rows per CTA (the MMA M dimension)
    "OCCUPANCY": None,  # compiler hint: CTAs per SM (None = compiler's choice)
    # compiler hint: warps of the compute warp groups (4 or 8 with tileiras 13.4).  8 = two warp groups
    # sharing the 64x512 fp32 accumulator (168 regs, no spill); None gave 255 regs + 2.6 KB stack.
    "NUM_WORKER_WARPS": 8,
}

try:  # the module must import on machines without cuTile (the registry then reports it missing)
    import cuda.tile as ct
except ImportError:  # pragma: no cover - depends on the machine
    ct = None

if ct is not None:
    ConstInt = ct.Constant[int]

    @ct.kernel
    def mla_v1_kernel(Q, KV, BT, SEQ, OUT, LSE, qk_scale_log2: float, S: int, H: int, MB: int,
                      BH: ConstInt, DV: ConstInt, DR: ConstInt, PG: ConstInt):
        rt = ct.bid(0)  # row tile
        bi = ct.bid(1)  # sequence
        t = ct.load(SEQ, (bi,), shape=())
        zero = ct.PaddingMode.ZERO
        q = ct.load(Q, (bi, rt, 0), shape=(1, BH, DV), padding_mode=zero).reshape((BH, DV))
        # the 64 rope dims are tile index DV // DR of a 64-wide tiling of the 576 dims
        qr = ct.load(Q, (bi, rt, DV // DR), shape=(1, BH, DR), padding_mode=zero).reshape((BH, DR))

        rows = rt * BH + ct.arange(BH, dtype=ct.int32)
        limit = t - S + rows // H  # last key position each row may see
        limit = ct.minimum(limit, t - 1)  # padded rows past s*h: keep them inside the sequence
        limit = limit[:, None]
        cols = ct.arange(PG, dtype=ct.int32)[None, :]

        m_i = ct.full((BH, 1), -1.0e30, dtype=ct.float32)
        l_i = ct.zeros((BH, 1), dtype=ct.float32)
        acc = ct.zeros((BH, DV), dtype=ct.float32)

        n_pages = (t + PG - 1) // PG
        n_full = (t - S + 1) // PG  # pages with every position visible to every row
        for j in range(0, n_pages):
            page = ct.load(BT, (bi * MB + j,), shape=())  # BT is the flat [b * max_blocks] table
            kt = ct.load(KV, (page, 0, 0), shape=(1, DV, PG), order=(0, 2, 1)).reshape((DV, PG))
            kr = ct.load(KV, (page, DV // DR, 0), shape=(1, DR, PG), order=(0, 2, 1)).reshape((DR, PG))
            sc = ct.zeros((BH, PG), dtype=ct.float32)
            sc = ct.mma(q, kt, sc)
            sc = ct.mma(qr, kr, sc)
            sc = sc * qk_scale_log2
            if j >= n_full:
                visible = (j * PG + cols) <= limit
                sc = ct.where(visible, sc, -1.0e30)
            m_new = ct.maximum(m_i, ct.max(sc, axis=1, keepdims=True))
            p = ct.exp2(sc - m_new, flush_to_zero=True)
            alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.load(KV, (page, 0, 0), shape=(1, PG, DV)).reshape((PG, DV))
            acc = ct.mma(p.astype(ct.bfloat16), v, acc * alpha)
            m_i = m_new

        o = ct.truediv(acc, l_i)
        ct.store(OUT, (bi, rt, 0), o.astype(ct.bfloat16).reshape((1, BH, DV)))
        lse2 = m_i + ct.log2(l_i)  # log2 of the softmax denominator
        lse_nat = lse2.reshape((BH,)) * 0.6931471805599453
        ct.scatter(LSE, bi * (H * S) + (rows % H) * S + rows // H, lse_nat, mask=rows < S * H)


def supports(params: dict[str, int]) -> str | None:
    return None


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    cfg = cc.merged_config(CONFIG, config)
    shp = cc.check_shapes(q, kv_cache, block_table, cache_seqlens, out, lse)
    bh = int(cfg["BLOCK_H"])
    cc.check_block_h(bh)
    if ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    q3 = q.view(shp.b, shp.rows, cc.D_QK)
    o3 = out.view(shp.b, shp.rows, cc.D_V)
    kernel = cc.with_hints(mla_v1_kernel, occupancy=cfg["OCCUPANCY"], num_worker_warps=cfg["NUM_WORKER_WARPS"])
    grid = (cc.row_blocks(shp.rows, bh), shp.b, 1)
    cc.launch(grid, kernel, (q3, kv_cache, block_table.view(-1), cache_seqlens, o3, lse.view(-1),
                             float(softmax_scale) * cc.LOG2E, shp.s, shp.h, shp.max_pages,
                             bh, cc.D_V, cc.D_ROPE, cc.PAGE))
    return out, lse


# compile every launch of a shape outside the shared GPU's lock (xdist workers): see _cutile_prepare
prepare = _cutile_prepare.preparer(run)
