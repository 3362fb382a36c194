"""Host side the cuTile rmsnorm_fp8 versions share: the launch on the caller's stream (or its compile alone, in a
version's ``prepare``), tile-size helpers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    """``ct.launch`` on the current torch stream, or, inside a version's ``prepare``, the compile alone."""
    from kforge_kernels._shared.cutile_prepare import launch as _launch

    _launch(grid, kernel, args)


def empty(params: Mapping[str, int], device: Any) -> dict[str, Any]:
    """Uninitialised inputs and outputs of the shapes and dtypes the spec makes for ``params`` (for prepare)."""
    import torch

    from kforge_kernels.rmsnorm_fp8.spec import SPEC

    t, d = int(params["t"]), int(params["d"])
    return {"x": torch.empty(t, d, dtype=torch.bfloat16, device=device),
            "weight": torch.empty(d, dtype=torch.bfloat16, device=device), "eps": 1e-6} | \
        dict(SPEC.alloc_outputs(params, device=device))


def preparer(run: Callable[..., Any]) -> Callable[..., None]:
    """A version's ``prepare``: its launches compiled for a shape outside the shared GPU's lock."""
    from kforge_kernels._shared.cutile_prepare import preparer as _preparer

    return _preparer(run, empty)
