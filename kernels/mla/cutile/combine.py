"""cuTile combine of split-KV partial results (shared by the split-KV MLA versions).

Each split ``i`` of a sequence wrote, per folded row ``r``, its normalised partial output
``o_i[r, :512]`` (float32 or bf16) and ``lse2_i[r]``, the log2 of its softmax denominator
(``-inf`` for a split that saw no key).  The final output is the weighted mean with weights
``w_i = 2^(lse2_i - max_j lse2_j)`` and ``lse = (max + log2(sum w_i)) * ln 2``, written into
``out [b, s*h, 512]`` and scattered into ``lse [b, h, s]``.
"""

from __future__ import annotations

import math
from typing import Any

from kforge_kernels.mla.cutile import common as cc

try:
    import cuda.tile as ct
except ImportError:  # pragma: no cover - depends on the machine
    ct = None

if ct is not None:
    ConstInt = ct.Constant[int]

    @ct.kernel
    def mla_combine_kernel(OP, LP, OUT, LSE, NS: int, H: int, S: int, BR: ConstInt, DV: ConstInt):
        rt = ct.bid(0)
        bi = ct.bid(1)
        rows = rt * BR + ct.arange(BR, dtype=ct.int32)
        neg = ct.PaddingMode.NEG_INF
        lmax = ct.full((BR,), -math.inf, dtype=ct.float32)
        for i in range(NS):
            li = ct.load(LP, (bi, i, rt), shape=(1, 1, BR), padding_mode=neg).reshape((BR,))
            lmax = ct.maximum(lmax, li)
        # rows past the array (or, impossibly, with no key at all) must not make NaN
        lmax = ct.where(lmax == -math.inf, 0.0, lmax)
        acc = ct.zeros((BR, DV), dtype=ct.float32)
        den = ct.zeros((BR,), dtype=ct.float32)
        for i in range(NS):
            li = ct.load(LP, (bi, i, rt), shape=(1, 1, BR), padding_mode=neg).reshape((BR,))
            w = ct.exp2(li - lmax, flush_to_zero=True)
            oi = ct.load(OP, (bi, i, rt, 0), shape=(1, 1, BR, DV),
                         padding_mode=ct.PaddingMode.ZERO).reshape((BR, DV)).astype(ct.float32)
            acc = acc + oi * w[:, None]
            den = den + w
        den = ct.where(den > 0.0, den, 1.0)
        o = acc / den[:, None]
        ct.store(OUT, (bi, rt, 0), o.astype(OUT.dtype).reshape((1, BR, DV)))
        lse = (lmax + ct.log2(den)) * 0.6931471805599453
        ct.scatter(LSE, bi * (H * S) + (rows % H) * S + rows // H, lse, mask=rows < S * H)


def combine(o_part: Any, lse2_part: Any, out3: Any, lse: Any, h: int, *, rows_per_cta: int = 16) -> None:
    """Launch the combine: ``o_part [b, NS, R, 512]``, ``lse2_part [b, NS, R]`` -> ``out3``, ``lse [b, h, s]``.

    ``lse`` is passed flat (one stride class for every ``s``: cuTile specialises kernels on the
    divisibility of strides, and each new class costs a ~10 s compile).
    """
    if ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    b, ns, rows, dv = (int(x) for x in o_part.shape)
    if rows_per_cta not in (4, 8, 16, 32):
        raise ValueError(f"COMBINE_ROWS must be 4, 8, 16 or 32, got {rows_per_cta}")
    grid = (cc.cdiv(rows, rows_per_cta), b, 1)
    cc.launch(grid, mla_combine_kernel, (o_part, lse2_part, out3, lse.view(-1), ns, h, rows // h, rows_per_cta, dv))
