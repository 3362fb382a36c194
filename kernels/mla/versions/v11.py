"""v11: v3's split-KV main kernel unchanged + a faster combine launch (``_cutile_combine2``).

v3's decode trial (b=32, s=1, h=128, t=4096) is the main kernel (2 splits, 128 CTAs, 91.3 us by
ncu) and the combine (13.7 us for 8.4 MB read + 4.2 MB written, ~1 TB/s).  v5/v10 showed that
fusing the combine into the main kernel is slower (131 us), so v11 keeps two launches and makes
the second one bandwidth-shaped.  The old combine (256 CTAs of 16 x 512) compiles to 64 scalar
``ld.global.b16`` + 64 ``st.global.b16`` per thread, each behind a bounds branch.
``_cutile_combine2`` (its docstring has the compile evidence):

* one split loop, with every split's lse2 read in one tile load before it: tileiras then moves
  the partials and the output with TMA in a warp-specialised kernel (predicted to matter most);
* NS a compile-time constant (fixed trip count, every split's load in flight at once);
* ``COMBINE_ROWS`` x ``COMBINE_COLS`` per CTA (default 32 x 128: 512 CTAs, 16 KB read each)
  with ``COMBINE_OCCUPANCY`` (None: 4 at 32 x 128, fewer for bigger tiles; without a hint
  tileiras takes 255 regs x 256 threads, one CTA per SM);
* lse with a plain tile store when ``s == 1`` (scatter kept for ``s > 1``);
* ``COMBINE_LATENCY``: DRAM-latency hint of the partial loads (None = compiler's).

Prediction: decode = main 91 us (unchanged) + combine ~5 us => ~97 us (v3: 106.8 us, harness);
spec identical to v3 (one split: the main kernel writes ``out``/``lse`` directly, no combine).
"""

from __future__ import annotations

from typing import Any

from kforge_kernels.mla.cutile import combine2 as comb2
from kforge_kernels.mla.cutile import common as cc
from kforge_kernels.mla.cutile import prepare as _cutile_prepare
from kforge_kernels.mla import v3 as _v3

LANGUAGE = "cutile-dsl"
PARENT = "v3"
DESCRIPTION = "cuTile: v3 main kernel + TMA combine (one split loop, constant NS, row x column-chunk CTAs, lse store)"
#: ncu kernel-name substrings -> stage names in profile reports
STAGE_NAMES = {"mla_combine2_kernel": "combine pass", "mla_v3_kernel": "split-KV main pass"}

CONFIG: dict[str, Any] = {
    "BLOCK_H": 64,
    "NUM_SPLITS": None,  # None: chosen from b, row tiles and max pages to fill the SMs (as v3)
    "WAVES": 1.0,
    "MIN_PAGES": 4,
    "PARTIAL_DTYPE": "bf16",  # "bf16" or "fp32" split partials
    "KV_LATENCY": None,  # None or 1..10: latency hint of the KV page loads
    # 64 x 256 (128 CTAs, 64 KB read each) won the H200 sweep of 2026-12-02 (decode 121.6 us vs
    # 132.0 at 32 x 128 and 151.6 for v3, sweep timer): see docs/kernels/mla.md, v11
    "COMBINE_ROWS": 64,  # folded rows per combine CTA: 8, 16, 32, 64 or 128
    "COMBINE_COLS": 256,  # output columns per combine CTA: 64, 128, 256 or 512
    "COMBINE_LATENCY": None,  # None or 1..10: latency hint of the combine's partial loads
    "COMBINE_OCCUPANCY": None,  # None (4 CTAs/SM at 32 x 128, fewer for bigger tiles) or 1..32
    "OCCUPANCY": None,
    "NUM_WORKER_WARPS": 8,
}


def supports(params: dict[str, int]) -> str | None:
    return None


def run(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, softmax_scale: float, *, out: Any, lse: Any,
        config: dict[str, Any] | None = None) -> tuple[Any, Any]:
    import torch

    cfg = cc.merged_config(CONFIG, config)
    shp = cc.check_shapes(q, kv_cache, block_table, cache_seqlens, out, lse)
    bh = int(cfg["BLOCK_H"])
    cc.check_block_h(bh)
    lat = int(cfg["KV_LATENCY"] or 0)
    if not 0 <= lat <= 10:
        raise ValueError(f"KV_LATENCY must be None or 1..10, got {lat}")
    crows, ccols, clat = int(cfg["COMBINE_ROWS"]), int(cfg["COMBINE_COLS"]), int(cfg["COMBINE_LATENCY"] or 0)
    cocc = None if cfg["COMBINE_OCCUPANCY"] is None else int(cfg["COMBINE_OCCUPANCY"])
    comb2.check_knobs(crows, ccols, clat, cocc)
    pdt = _v3._partial_dtype(str(cfg["PARTIAL_DTYPE"]))
    if _v3.ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    ns = _v3.pick_splits(shp.b, shp.s, shp.h, shp.max_pages, cfg, cc.sm_count(cc.device_index(q)))
    q3 = q.view(shp.b, shp.rows, cc.D_QK)
    o3 = out.view(shp.b, shp.rows, cc.D_V)
    direct = ns == 1
    if direct:
        o_part, l_part = out.view(shp.b, 1, shp.rows, cc.D_V), lse.view(shp.b, 1, shp.rows)
    else:
        o_part = torch.empty((shp.b, ns, shp.rows, cc.D_V), dtype=pdt, device=q.device)
        l_part = torch.empty((shp.b, ns, shp.rows), dtype=torch.float32, device=q.device)
    kernel = cc.with_hints(_v3.mla_v3_kernel, occupancy=cfg["OCCUPANCY"], num_worker_warps=cfg["NUM_WORKER_WARPS"])
    grid = (cc.row_blocks(shp.rows, bh), shp.b, ns)
    cc.launch(grid, kernel, (q3, kv_cache, block_table.view(-1), cache_seqlens, o_part, l_part, lse.view(-1),
                             float(softmax_scale) * cc.LOG2E, shp.s, shp.h, ns, shp.max_pages,
                             bh, cc.D_V, cc.D_ROPE, cc.PAGE,
                             direct, lat))
    if not direct:
        comb2.combine(o_part, l_part, o3, lse, shp.h, rows_per_cta=crows, cols_per_cta=ccols, latency=clat,
                      occupancy=cocc)
    return out, lse


# compile every launch of a shape outside the shared GPU's lock (xdist workers): see _cutile_prepare
prepare = _cutile_prepare.preparer(run)
