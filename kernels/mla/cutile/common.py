"""Host-side helpers shared by the cuTile MLA versions (no cuTile or torch import at module load).

The cuTile versions fold the ``s * h`` query rows of one sequence into one row axis
(row ``r`` is draft token ``r // h``, head ``r % h``), so ``q`` is launched as a
``[b, s*h, 576]`` view and ``out`` as a ``[b, s*h, 512]`` view; ``lse [b, h, s]`` is written
with a scatter.  Everything here is plain Python so the CPU tests can check it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

D_QK = 576
D_V = 512
D_ROPE = D_QK - D_V  # 64: cuTile tiles are powers of two, so QK^T is split as 512 + 64
PAGE = 64
LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)
H200_SMS = 132


@dataclasses.dataclass(frozen=True)
class MLAShape:
    """The sizes a launch needs, read from the tensors without touching device memory."""

    b: int
    s: int
    h: int
    max_pages: int  # block_table.shape[1]: an upper bound of every sequence's page count
    num_blocks: int

    @property
    def rows(self) -> int:
        return self.s * self.h


def check_shapes(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, out: Any, lse: Any) -> MLAShape:
    """Validate the MLA contract's shapes, dtypes and layouts; raise ValueError in one sentence."""
    if len(q.shape) != 4 or int(q.shape[3]) != D_QK:
        raise ValueError(f"q must be [b, s, h, {D_QK}] but is {list(q.shape)}; pass the absorbed query")
    b, s, h = (int(x) for x in q.shape[:3])
    if len(kv_cache.shape) != 3 or tuple(int(x) for x in kv_cache.shape[1:]) != (PAGE, D_QK):
        raise ValueError(f"kv_cache must be [num_blocks, {PAGE}, {D_QK}] but is {list(kv_cache.shape)}")
    if len(block_table.shape) != 2 or int(block_table.shape[0]) != b:
        raise ValueError(f"block_table must be [b={b}, max_blocks] but is {list(block_table.shape)}")
    if tuple(int(x) for x in cache_seqlens.shape) != (b,):
        raise ValueError(f"cache_seqlens must be [b={b}] but is {list(cache_seqlens.shape)}")
    if tuple(int(x) for x in out.shape) != (b, s, h, D_V):
        raise ValueError(f"out must be [{b}, {s}, {h}, {D_V}] but is {list(out.shape)}; "
                         "allocate it with SPEC.alloc_outputs")
    if tuple(int(x) for x in lse.shape) != (b, h, s):
        raise ValueError(f"lse must be [{b}, {h}, {s}] but is {list(lse.shape)}; allocate it with SPEC.alloc_outputs")
    for name, t in (("q", q), ("kv_cache", kv_cache), ("block_table", block_table), ("out", out), ("lse", lse)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (the kernels fold s*h rows); pass {name}.contiguous()")
    return MLAShape(b, s, h, int(block_table.shape[1]), int(kv_cache.shape[0]))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def row_blocks(rows: int, block_h: int) -> int:
    """How many BLOCK_H-row tiles cover the ``s*h`` folded rows of one sequence."""
    return cdiv(rows, block_h)


def choose_splits(
    b: int,
    row_tiles: int,
    max_pages: int,
    sms: int = H200_SMS,
    *,
    waves: float = 1.0,
    min_pages: int = 4,
    max_splits: int = 32,
) -> int:
    """Split count for split-KV: enough CTAs for ``waves`` waves on ``sms`` SMs, never splits shorter
    than ``min_pages`` pages (a split pays a q load and a workspace write), at most ``max_splits``.

    The grid is ``row_tiles * b * splits``; when that product already fills the machine, one split
    (no workspace, no combine) is returned.  The choice is rounded so the last wave is as full as
    possible: among the candidates the one with the least idle SM-time wins.
    """
    if b <= 0 or row_tiles <= 0 or max_pages <= 0:
        raise ValueError(f"choose_splits needs positive sizes (b={b}, row_tiles={row_tiles}, max_pages={max_pages})")
    base = b * row_tiles
    target = max(1, int(sms * waves))
    if base >= target:
        return 1
    limit = max(1, min(max_splits, max_pages // max(1, min_pages)))
    best, best_cost = 1, math.inf
    for n in range(1, limit + 1):
        ctas = base * n
        waves_needed = cdiv(ctas, sms)
        # time ~ waves_needed * (pages per split); idle slots cost the same as busy ones
        cost = waves_needed * cdiv(max_pages, n) + 0.5 * n  # small tie-break against needless splits
        if cost < best_cost - 1e-9:
            best, best_cost = n, cost
    return best


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    """Streaming multiprocessors of the device (132 on an H200 SXM)."""
    import torch

    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)


def device_index(t: Any) -> int:
    idx = getattr(t.device, "index", None)
    return 0 if idx is None else int(idx)


def launch(grid: tuple[int, ...], kernel: Any, args: tuple[Any, ...]) -> None:
    """``ct.launch`` on torch's current stream (the benchmark's CUDA events time that stream); in a
    version's ``prepare`` (``_cutile_prepare``) the kernel is compiled for ``args`` and not launched."""
    from kforge_kernels.mla.cutile import prepare as _cutile_prepare

    if _cutile_prepare.preparing():
        _cutile_prepare.compile_launch(grid, kernel, args)
        return
    import cuda.tile as ct
    import torch

    ct.launch(torch.cuda.current_stream(), grid, kernel, args)


_hinted: dict[tuple[int, tuple[tuple[str, Any], ...]], Any] = {}


def with_hints(kernel: Any, **hints: Any) -> Any:
    """The kernel recompiled with the given compiler hints (``occupancy``, ``num_worker_warps``...).

    ``None`` values are left to the compiler.  Cached, so a config change compiles once.
    """
    hints = {k: v for k, v in hints.items() if v is not None}
    if not hints:
        return kernel
    key = (id(kernel), tuple(sorted(hints.items())))
    got = _hinted.get(key)
    if got is None:
        got = kernel.replace_hints(**hints)
        _hinted[key] = got
    return got


def merged_config(defaults: dict[str, Any], config: dict[str, Any] | None) -> dict[str, Any]:
    """``defaults`` overridden by ``config``; unknown keys are an error (a typo must not go unnoticed)."""
    cfg = dict(defaults)
    for key, value in (config or {}).items():
        if key not in defaults:
            raise ValueError(f"unknown config key {key!r}; this version's keys are {', '.join(sorted(defaults))}")
        cfg[key] = value
    return cfg


def check_block_h(block_h: int) -> None:
    if block_h not in (16, 32, 64, 128):
        raise ValueError(f"BLOCK_H must be 16, 32, 64 or 128 (a power of two cuTile tile), got {block_h}")
