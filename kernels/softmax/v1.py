"""v1: cuTile row softmax -- each CTA loads BLOCK_R whole rows as one tile and reduces in float32.

The row tile is ``next_pow2(cols)`` wide (cuTile tiles are powers of two); the padding past
``cols`` loads as ``-inf`` so it contributes ``exp2(-inf) = 0`` to the sum, and the store drops it.
"""

from __future__ import annotations

import math
from typing import Any

LANGUAGE = "cutile-dsl"
PARENT = "v0"
DESCRIPTION = "cuTile: BLOCK_R rows per CTA as one pow2-wide tile, fp32 max/exp2/sum, -inf padding"
CONFIG: dict[str, Any] = {
    "BLOCK_R": None,  # rows per CTA; None: as many as fit 8192 elements (1 row at 8192 cols)
    "MAX_COLS": 16384,  # widest row this single-tile version accepts
}

try:
    import cuda.tile as ct
except ImportError:  # pragma: no cover - depends on the machine
    ct = None

if ct is not None:
    ConstInt = ct.Constant[int]

    @ct.kernel
    def softmax_v1_kernel(X, Y, BR: ConstInt, BC: ConstInt):
        rb = ct.bid(0)
        x = ct.load(X, (rb, 0), shape=(BR, BC), padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
        x = x * 1.4426950408889634  # work in log2 units: exp(x - m) = exp2((x - m) * log2 e)
        m = ct.max(x, axis=1, keepdims=True)
        e = ct.exp2(x - m, flush_to_zero=True)
        y = e / ct.sum(e, axis=1, keepdims=True)
        ct.store(Y, (rb, 0), y.astype(Y.dtype))


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def block_rows(cols: int, block_r: int | None) -> int:
    """Rows per CTA: the config's, or as many as keep the tile at <= 8192 elements (max 16)."""
    if block_r:
        if block_r & (block_r - 1):
            raise ValueError(f"BLOCK_R must be a power of two, got {block_r}")
        return int(block_r)
    return max(1, min(16, 8192 // next_pow2(cols)))


def supports(params: dict[str, int]) -> str | None:
    if int(params["cols"]) > CONFIG["MAX_COLS"]:
        return f"cols={params['cols']} exceeds the {CONFIG['MAX_COLS']} columns one tile holds"
    return None


def run(x, *, y, config=None):
    cfg = dict(CONFIG)
    cfg.update(config or {})
    rows, cols = (int(d) for d in x.shape)
    if tuple(int(d) for d in y.shape) != (rows, cols):
        raise ValueError(f"y must have x's shape {[rows, cols]} but has {list(y.shape)}")
    if cols > int(cfg["MAX_COLS"]):
        raise ValueError(f"cols={cols} exceeds MAX_COLS={cfg['MAX_COLS']}; use the torch version v0 for wider rows")
    if not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError("x and y must be contiguous; pass x.contiguous()")
    if ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    import torch

    br = block_rows(cols, cfg["BLOCK_R"])
    ct.launch(torch.cuda.current_stream(), (math.ceil(rows / br), 1, 1), softmax_v1_kernel,
              (x, y, br, next_pow2(cols)))
    return (y,)
