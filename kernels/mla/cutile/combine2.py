"""cuTile combine of split-KV partials, second form (v11+): one split loop, TMA, rows x column chunks.

Same maths and contract as ``_cutile_combine`` (kept unchanged for v2-v4): split ``i`` wrote, per
folded row ``r``, its normalised partial ``o_i[r, :512]`` (bf16 or float32) and ``lse2_i[r]``
(log2 of its softmax denominator, ``-inf`` for a split that saw no key); the result is the mean
weighted by ``w_i = 2^(lse2_i - max_j lse2_j)`` and ``lse = (max + log2(sum w_i)) * ln 2``.

What changed, from the PTX tileiras 13.4 makes of each form (decode trial, ``_cutile_compilecheck``):

* **One split loop.**  The old kernel has two loops over the splits (the max of lse2, then the
  weighted sum); with that shape tileiras keeps every access a plain per-thread global access --
  64 scalar ``ld.global.b16`` + 64 ``st.global.b16`` per thread, each behind its own bounds branch
  (128 threads, 255 regs).  Here all lse2 of a row tile come in one ``(1, NS_P2, BR, 1)`` tile load
  (padded with -inf) before a single loop over the splits, and tileiras then lowers the partial
  loads and the output store to TMA bulk copies in a warp-specialised kernel (a producer warp
  issues every split's load ahead of the maths): predicted to be the change that matters.
  Checked negatives: a constant NS alone, ``check_bounds=False`` alone, or ``allow_tma=True`` on
  the old two-loop body leave it scalar.
* **NS a compile-time constant** (the loop has a fixed trip count; both decode partials are in
  flight at once through the TMA pipeline).  Loading a split *group* in one ``(1, SG, BR, BC)``
  tile was tried and dropped: the 3-D reduction spills (3-15 KB of stack at 32x256 / 16x512).
* **Rows x column chunks per CTA** (``rows_per_cta`` x ``cols_per_cta``, grid
  ``rows/BR x b x 512/BC``) and a register budget from the ``occupancy`` hint: without it tileiras
  takes 255 regs x 256 threads = one CTA per SM.  Default 32 x 128 at occupancy 4 (64 regs):
  decode grid 4 x 32 x 4 = 512 CTAs, one wave of 4 CTAs per SM, 16 KB read each.
* **lse**: when ``s == 1``, ``lse [b, h, 1]`` viewed as ``[b, h]`` is the folded row order, so a
  plain ``(1, BR)`` tile store replaces the scatter; ``s > 1`` keeps the masked scatter.  Only the
  CTAs of column chunk 0 write lse.
* ``latency`` (1..10) is forwarded as the DRAM-latency hint of the partial loads.

Ragged shapes need no second path: TMA clips out-of-bounds rows in hardware (zero fill) and the
store clips them.  Empty splits (lse2 = -inf) get weight 0; rows with no key at all (padding) get
``max = 0`` and a denominator of 1, as in the old combine, so nothing turns into NaN.
"""

from __future__ import annotations

import math
from typing import Any

from kforge_kernels.mla.cutile import common as cc

ROW_CHOICES = (8, 16, 32, 64, 128)
COL_CHOICES = (64, 128, 256, 512)
#: tile elements (BR x BC) that fit the registers of 4 CTAs per SM; the automatic occupancy hint
#: is 4 * this / (BR * BC), clamped to 1..4
AUTO_OCC_ELEMS = 4096

try:
    import cuda.tile as ct
except ImportError:  # pragma: no cover - depends on the machine
    ct = None

if ct is not None:
    ConstInt = ct.Constant[int]
    ConstBool = ct.Constant[bool]

    @ct.kernel
    def mla_combine2_kernel(OP, LP, OUT, LSE, LSE_BR, H: int, S: int, NS: ConstInt, NSP: ConstInt,
                            BR: ConstInt, BC: ConstInt, LSE_ROWS: ConstBool, LAT: ConstInt):
        # OP [b, NS, R, 512]; LP [b, NS, R, 1]: the lse2 partials with a unit axis, so the weights
        # load straight into the (BR, 1) shape that broadcasts over the columns.
        # LSE is lse flat [b*h*s] (scatter); LSE_BR is lse as [b, s*h] (row order when s == 1)
        rt = ct.bid(0)
        bi = ct.bid(1)
        cj = ct.bid(2)
        neg = ct.PaddingMode.NEG_INF
        # every split's lse2 of the row tile in one load (no separate max loop: see the docstring);
        # splits >= NS (NSP > NS) and rows past the array read as -inf
        la = ct.load(LP, (bi, 0, rt, 0), shape=(1, NSP, BR, 1), padding_mode=neg).reshape((NSP, BR, 1))
        lmax = ct.max(la, axis=0)  # (BR, 1)
        # rows past the array (or, impossibly, with no key at all) must not make NaN
        lmax = ct.where(lmax == -math.inf, 0.0, lmax)
        den = ct.zeros((BR, 1), dtype=ct.float32)
        acc = ct.zeros((BR, BC), dtype=ct.float32)
        for i in range(NS):
            li = ct.load(LP, (bi, i, rt, 0), shape=(1, 1, BR, 1), padding_mode=neg).reshape((BR, 1))
            if LAT > 0:
                oi = ct.load(OP, (bi, i, rt, cj), shape=(1, 1, BR, BC), padding_mode=ct.PaddingMode.ZERO,
                             latency=LAT)
            else:
                oi = ct.load(OP, (bi, i, rt, cj), shape=(1, 1, BR, BC), padding_mode=ct.PaddingMode.ZERO)
            w = ct.exp2(li - lmax, flush_to_zero=True)
            acc = acc + oi.reshape((BR, BC)).astype(ct.float32) * w
            den = den + w
        den = ct.where(den > 0.0, den, 1.0)
        o = acc * (1.0 / den)
        ct.store(OUT, (bi, rt, cj), o.astype(OUT.dtype).reshape((1, BR, BC)))
        if cj == 0:
            lse = (lmax + ct.log2(den)) * 0.6931471805599453  # (BR, 1)
            if LSE_ROWS:
                ct.store(LSE_BR, (bi, rt), lse.reshape((1, BR)))
            else:
                rows = rt * BR + ct.arange(BR, dtype=ct.int32)
                ct.scatter(LSE, bi * (H * S) + (rows % H) * S + rows // H, lse.reshape((BR,)), mask=rows < S * H)


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def auto_occupancy(rows_per_cta: int, cols_per_cta: int) -> int:
    """The occupancy hint used when none is given: 4 CTAs per SM at 32 x 128, fewer for bigger tiles."""
    return max(1, min(4, 4 * AUTO_OCC_ELEMS // (rows_per_cta * cols_per_cta)))


def check_knobs(rows_per_cta: int, cols_per_cta: int, latency: int, occupancy: int | None) -> None:
    """Validate the combine knobs; raise ValueError in one sentence."""
    if rows_per_cta not in ROW_CHOICES:
        raise ValueError(f"COMBINE_ROWS must be one of {ROW_CHOICES}, got {rows_per_cta}")
    if cols_per_cta not in COL_CHOICES:
        raise ValueError(f"COMBINE_COLS must be one of {COL_CHOICES} (a power of two dividing 512), got {cols_per_cta}")
    if not 0 <= latency <= 10:
        raise ValueError(f"COMBINE_LATENCY must be None or 1..10, got {latency}")
    if occupancy is not None and not 1 <= occupancy <= 32:
        raise ValueError(f"COMBINE_OCCUPANCY must be None (automatic) or 1..32, got {occupancy}")


def combine(o_part: Any, lse2_part: Any, out3: Any, lse: Any, h: int, *, rows_per_cta: int = 32,
            cols_per_cta: int = 128, latency: int = 0, occupancy: int | None = None) -> None:
    """Launch the combine: ``o_part [b, NS, R, 512]``, ``lse2_part [b, NS, R]`` -> ``out3 [b, R, 512]``
    and ``lse [b, h, s]``."""
    check_knobs(rows_per_cta, cols_per_cta, latency, occupancy)
    if ct is None:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')")
    b, ns, rows, dv = (int(x) for x in o_part.shape)
    s = rows // h
    occ = occupancy or auto_occupancy(rows_per_cta, cols_per_cta)
    kernel = cc.with_hints(mla_combine2_kernel, occupancy=occ)
    grid = (cc.cdiv(rows, rows_per_cta), b, dv // cols_per_cta)
    cc.launch(grid, kernel, (o_part, lse2_part.view(b, ns, rows, 1), out3, lse.view(-1), lse.view(b, rows), h, s,
                             ns, pow2_at_least(ns), rows_per_cta, cols_per_cta, s == 1, latency))
