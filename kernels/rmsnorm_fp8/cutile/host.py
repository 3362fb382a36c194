"""Host side the cuTile rmsnorm_fp8 versions share: the launch on the caller's stream, tile-size helpers."""

from __future__ import annotations

from typing import Any

SMS = 132  # H100 / H200 SXM; only used to keep at least two waves of CTAs when choosing rows per CTA


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two dividing ``n``, at most ``cap``."""
    p = 1
    while p * 2 <= cap and n % (p * 2) == 0:
        p *= 2
    return p


def launch(grid: tuple[int, int, int], kernel: Any, args: tuple) -> None:
    """``ct.launch`` on the current torch stream (one sentence when cuTile is missing)."""
    try:
        import cuda.tile as ct
    except ImportError:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')") from None
    import torch

    ct.launch(torch.cuda.current_stream(), grid, kernel, args)
