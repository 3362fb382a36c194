"""v6: v5 with lazy (thresholded) rescaling of the output accumulator -- exact, fewer rescales.

In v5 every page multiplies the 64x512 float32 accumulator (and ``l``) by
``alpha = 2^(m_old - m_new)`` before the P.V MMA, which also makes each P.V wgmma wait for the
previous one to retire.  v6 keeps the running max ``m`` stale while no row's tile max exceeds it
by more than ``RESCALE_TH`` (log2 units; probabilities then stay <= 2^TH, safe in bf16 P and a
float32 accumulator), and only then rescales -- one branch per page on a CTA-wide scalar
(``any row grew > TH``).  The result is exact (``l`` and ``acc`` use the same stale ``m``; the
final ``acc / l`` and ``lse = m + log2 l`` do not depend on which ``m`` was used).  After the
first page the max rarely grows by 2^8 in attention over a long context, so almost every rescale
is skipped.  ``LAZY="direct"`` (default) uses it only for one-split launches (the spec trial):
with the fused combine's branch also present (split launches) tileiras 13.4 drops warp
specialisation (256 threads, 240 regs) -- ``LAZY="always"`` measures that trade.  ``RESCALE_TH = 0`` rescales whenever the max grows at all (v5's numbers except
that equal-max pages skip the multiply).

Inherited from v5: fused split combine (last split combines via an atomic counter), cached
launch plan, direct out/lse when one split, ``KV_LATENCY``.
"""

from __future__ import annotations

import math
from typing import Any

from kforge_kernels.mla.cutile import common as cc
from kforge_kernels.mla.cutile import plan as plan
from kforge_kernels.mla.cutile import prepare as _cutile_prepare

LANGUAGE = "cutile-dsl"
PARENT = "v5"
DESCRIPTION = "cuTile: v5 + lazy rescaling of the accumulator (only when a row max grows by > RESCALE_TH, exact)"
CONFIG: dict[str, Any] = {
    "BLOCK_H": 64,
    "NUM_SPLITS": None,  # None: chosen from b, row tiles and max pages to fill the SMs
    "WAVES": 1.0,
    "MIN_PAGES": 4,
    "KV_LATENCY": None,  # None or 1..10: latency hint of the KV page loads
    "OCCUPANCY": None,
    "NUM_WORKER_WARPS": 8,
    "COMBINE_COLS": 64,
    "RESCALE_TH": 8.0,
    "LAZY": "direct",  # lazy rescaling: "direct" (one-split launches only), "always" or "never"  # log2 units: rescale only when some row max grows by more than this  # columns per step of the fused combine (registers vs loop trips)
}

try:
    import cuda.tile as ct
except ImportError:  # pragma: no cover - depends on the machine
    ct = None

if ct is not None:
    ConstInt = ct.Constant[int]
    ConstBool = ct.Constant[bool]

    @ct.kernel
    def mla_v6_kernel(Q, KV, BT, SEQ, OUT, LSE, OP, LP, CNT, qk_scale_log2: float, S: int, H: int, NS: int,
                      MB: int,
                      BH: ConstInt, DV: ConstInt, DR: ConstInt, PG: ConstInt, DIRECT: ConstBool,
                      LAT: ConstInt, CW: ConstInt, TH: float, LAZY: ConstBool):
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
            if LAT > 0:
                kt = ct.load(KV, (page, 0, 0), shape=(1, DV, PG), order=(0, 2, 1), latency=LAT).reshape((DV, PG))
                kr = ct.load(KV, (page, DV // DR, 0), shape=(1, DR, PG), order=(0, 2, 1),
                             latency=LAT).reshape((DR, PG))
            else:
                kt = ct.load(KV, (page, 0, 0), shape=(1, DV, PG), order=(0, 2, 1)).reshape((DV, PG))
                kr = ct.load(KV, (page, DV // DR, 0), shape=(1, DR, PG), order=(0, 2, 1)).reshape((DR, PG))
            sc = ct.zeros((BH, PG), dtype=ct.float32)
            sc = ct.mma(q, kt, sc)
            sc = ct.mma(qr, kr, sc)
            sc = sc * qk_scale_log2
            if j >= n_full:
                sc = ct.where((j * PG + cols) <= limit, sc, -math.inf)
            m_new = ct.maximum(m_i, ct.max(sc, axis=1, keepdims=True))
            if LAZY:
                if ct.max(m_new - m_i) > TH:  # some row's max grew a lot: move m, rescale acc and l
                    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
                    acc = acc * alpha
                    l_i = l_i * alpha
                    m_i = m_new
                p = ct.exp2(sc - m_i, flush_to_zero=True)  # <= 2^TH while m_i is stale
                l_i = l_i + ct.sum(p, axis=1, keepdims=True)
                v = ct.load(KV, (page, 0, 0), shape=(1, PG, DV)).reshape((PG, DV))
                acc = ct.mma(p.astype(ct.bfloat16), v, acc)
            else:  # v5's eager rescale
                p = ct.exp2(sc - m_new, flush_to_zero=True)
                alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
                l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
                v = ct.load(KV, (page, 0, 0), shape=(1, PG, DV)).reshape((PG, DV))
                acc = ct.mma(p.astype(ct.bfloat16), v, acc * alpha)
                m_i = m_new

        l_safe = ct.where(l_i > 0.0, l_i, 1.0)
        o = acc / l_safe
        lse2 = m_i + ct.log2(l_i)
        lidx = bi * (H * S) + (rows % H) * S + rows // H  # flat lse [b, h, s] index of each row
        if DIRECT:
            ct.store(OUT, (bi, rt, 0), o.astype(OUT.dtype).reshape((1, BH, DV)))
            ct.scatter(LSE, lidx, lse2.reshape((BH,)) * 0.6931471805599453, mask=rows < S * H)
        else:
            ct.store(OP, (bi, sp, rt, 0), o.astype(OP.dtype).reshape((1, 1, BH, DV)), allow_tma=False)
            ct.store(LP, (bi, sp, rt), lse2.reshape((1, 1, BH)), allow_tma=False)
            # release our partial, acquire everybody else's; the last arrival combines
            old = ct.atomic_add(CNT, bi * ct.num_blocks(0) + rt, 1)
            if (old + 1) % NS == 0:
                # gathers/scatters only: a tile load or store (TMA) inside this `if` makes tileiras
                # drop the warp specialisation of the whole kernel (256 threads, spills)
                inb = rows < S * H
                lmax = ct.full((BH,), -math.inf, dtype=ct.float32)
                for i in range(NS):
                    li = ct.gather(LP, (bi, i, rows), mask=inb, padding_value=-math.inf)
                    lmax = ct.maximum(lmax, li)
                lmax = ct.where(lmax == -math.inf, 0.0, lmax)  # padded rows: no NaN
                den = ct.zeros((BH,), dtype=ct.float32)
                for i in range(NS):
                    li = ct.gather(LP, (bi, i, rows), mask=inb, padding_value=-math.inf)
                    den = den + ct.exp2(li - lmax, flush_to_zero=True)
                den = ct.where(den > 0.0, den, 1.0)
                ct.scatter(LSE, lidx, (lmax + ct.log2(den)) * 0.6931471805599453, mask=inb)
                # column chunks of CW keep the combine's registers small (no spills)
                for c in range(DV // CW):
                    dcol = c * CW + ct.arange(CW, dtype=ct.int32)[None, :]
                    cacc = ct.zeros((BH, CW), dtype=ct.float32)
                    for i in range(NS):
                        li = ct.gather(LP, (bi, i, rows), mask=inb, padding_value=-math.inf)
                        w = ct.exp2(li - lmax, flush_to_zero=True) / den
                        oi = ct.gather(OP, (bi, i, rows[:, None], dcol), mask=inb[:, None], padding_value=0.0)
                        cacc = cacc + oi.astype(ct.float32) * w[:, None]
                    ct.scatter(OUT, (bi, rows[:, None], dcol), cacc.astype(OUT.dtype), mask=inb[:, None])


def pick_splits(b: int, s: int, h: int, max_pages: int, cfg: dict[str, Any], sms: int = cc.H200_SMS) -> int:
    """The split count this version launches for a shape (pure; the CPU tests check it)."""
    if cfg.get("NUM_SPLITS"):
        return max(1, min(int(cfg["NUM_SPLITS"]), max_pages))
    tiles = cc.row_blocks(s * h, int(cfg["BLOCK_H"]))
    return cc.choose_splits(b, tiles, max_pages, sms, waves=float(cfg["WAVES"]), min_pages=int(cfg["MIN_PAGES"]))


def supports(params: dict[str, int]) -> str | None:
    return None


def _build(shp: cc.MLAShape, cfg: dict[str, Any], dev: Any) -> plan.Plan:
    bh = int(cfg["BLOCK_H"])
    cc.check_block_h(bh)
    lat = int(cfg["KV_LATENCY"] or 0)
    if not 0 <= lat <= 10:
        raise ValueError(f"KV_LATENCY must be None or 1..10, got {lat}")
    cw = int(cfg["COMBINE_COLS"])
    if cw not in (32, 64, 128, 256, 512):
        raise ValueError(f"COMBINE_COLS must be 32, 64, 128, 256 or 512, got {cw}")
    th = float(cfg["RESCALE_TH"])
    if not 0.0 <= th <= 10.0:
        raise ValueError(f"RESCALE_TH must be in 0..10 (log2 units; P is bf16), got {th}")
    mode = str(cfg["LAZY"])
    if mode not in ("direct", "always", "never"):
        raise ValueError(f"LAZY must be 'direct', 'always' or 'never', got {mode!r}")
    if ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    ns = pick_splits(shp.b, shp.s, shp.h, shp.max_pages, cfg, cc.sm_count(cc.device_index(dev)))
    # the rescale branch plus the fused combine's branch make tileiras drop warp specialisation
    # (256 threads, 240 regs), so by default only one-split launches rescale lazily
    lazy = mode == "always" or (mode == "direct" and ns == 1)
    kernel = cc.with_hints(mla_v6_kernel, occupancy=cfg["OCCUPANCY"], num_worker_warps=cfg["NUM_WORKER_WARPS"])
    grid = (cc.row_blocks(shp.rows, bh), shp.b, ns)
    ws = plan.split_workspaces(shp, ns, grid[0], dev)
    consts = (shp.s, shp.h, ns, shp.max_pages, bh, cc.D_V, cc.D_ROPE, cc.PAGE, ns == 1, lat, cw, th, lazy)
    return plan.Plan(kernel=kernel, grid=grid, workspaces=ws, consts=consts)


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    p = plan.get(__name__, CONFIG, config, (q, kv_cache, block_table, cache_seqlens, out, lse), _build)
    b, s, h = q.shape[0], q.shape[1], q.shape[2]
    cc.launch(p.grid, p.kernel, (q.view(b, s * h, cc.D_QK), kv_cache, block_table.view(-1), cache_seqlens,
                                 out.view(b, s * h, cc.D_V), lse.view(-1), *p.workspaces,
                                 float(softmax_scale) * cc.LOG2E, *p.consts))
    return out, lse


# compile every launch of a shape outside the shared GPU's lock (xdist workers): see _cutile_prepare
prepare = _cutile_prepare.preparer(run)
