"""v0: the float32 torch reference run as a kernel -- the baseline on every machine."""

from __future__ import annotations

from typing import Any

LANGUAGE = "torch"
PARENT = None
DESCRIPTION = "torch float32 reference (gather + dense softmax attention), the baseline"
CONFIG: dict[str, Any] = {}


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    from kforge_kernels.mla.spec import SPEC

    ref = SPEC.reference(
        {"q": q, "kv_cache": kv_cache, "block_table": block_table,
         "cache_seqlens": cache_seqlens, "softmax_scale": softmax_scale}
    )
    out.copy_(ref["out"])
    lse.copy_(ref["lse"])
    return out, lse
