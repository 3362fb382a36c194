"""Cached launch plans for the cuTile MLA versions v5+: the per-call host work is a dict lookup.

A plan holds everything that depends only on (version, config, shapes, dtypes, device): the
hinted kernel, the grid, the constant launch arguments and the split workspaces (partials and
the int32 arrival counters of the fused combine).  Inputs are validated with
``_cutile_common.check_shapes`` when a plan is built; later calls with the same key only
re-check contiguity (a view of a non-contiguous tensor would fold the wrong rows).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from kforge_kernels.mla.cutile import common as cc
from kforge_kernels.mla.cutile import prepare as _cutile_prepare


@dataclasses.dataclass(frozen=True)
class Plan:
    kernel: Any
    grid: tuple[int, int, int]
    workspaces: tuple[Any, ...]  # (o_part, lse2_part, counters)
    consts: tuple[Any, ...]  # launch arguments after the softmax scale


_plans: dict[tuple[Any, ...], Plan] = {}
MAX_PLANS = 64  # fuzzing makes many shapes; workspaces are small but must not pile up forever


def config_key(config: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(config.items())) if config else ()


def get(module: str, defaults: dict[str, Any], config: dict[str, Any] | None, tensors: tuple[Any, ...],
        build: Callable[[cc.MLAShape, dict[str, Any], Any], Plan]) -> Plan:
    """The plan for these tensors ``(q, kv_cache, block_table, cache_seqlens, out, lse)``, built once."""
    q, kv, bt, seq, out, lse = tensors
    key = (module, config_key(config), q.shape, kv.shape, bt.shape, seq.shape, out.shape, lse.shape,
           q.dtype, kv.dtype, out.dtype, q.device)
    got = _plans.get(key)
    if got is None:
        cfg = cc.merged_config(defaults, config)
        shp = cc.check_shapes(q, kv, bt, seq, out, lse)
        got = build(shp, cfg, q)
        if _cutile_prepare.preparing():
            return got  # its counters are not zeroed (no kernel may run): never reuse it for a launch
        if len(_plans) >= MAX_PLANS:
            _plans.pop(next(iter(_plans)))
        _plans[key] = got
        return got
    if not (q.is_contiguous() and bt.is_contiguous() and out.is_contiguous() and lse.is_contiguous()):
        cc.check_shapes(q, kv, bt, seq, out, lse)  # raises the one-sentence error
    return got


def split_workspaces(shp: cc.MLAShape, ns: int, row_tiles: int, like: Any) -> tuple[Any, Any, Any]:
    """bf16 partial outputs ``[b, ns, rows, 512]``, float32 log2 partial lse ``[b, ns, rows]`` and
    zeroed int32 arrival counters ``[b * row_tiles]``.  With one split nothing is read or written
    (the kernel stores ``out``/``lse`` directly), so tiny placeholders are passed."""
    import torch

    dev = like.device
    # zeroing runs a kernel, which a prepare (outside the shared GPU's lock) must not: its plan is thrown away
    zeros = torch.empty if _cutile_prepare.preparing() else torch.zeros
    if ns == 1:
        return (torch.empty((1, 1, 16, cc.D_V), dtype=torch.bfloat16, device=dev),
                torch.empty((1, 1, 16), dtype=torch.float32, device=dev),
                zeros((16,), dtype=torch.int32, device=dev))
    return (torch.empty((shp.b, ns, shp.rows, cc.D_V), dtype=torch.bfloat16, device=dev),
            torch.empty((shp.b, ns, shp.rows), dtype=torch.float32, device=dev),
            zeros((max(16, shp.b * row_tiles),), dtype=torch.int32, device=dev))


def clear() -> None:
    """Drop every cached plan (tests; frees the workspaces)."""
    _plans.clear()
