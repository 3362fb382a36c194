"""Peer: DeepSeek's FlashMLA dense decode (``flash_mla.flash_mla_with_kvcache``), the kernel whose
published H800 figure (660 TFLOP/s compute-bound) set the MLA decode target.

FlashMLA has no wheel (PyPI ``flash-mla`` is a placeholder): it is built from source on the GPU
machine (``bash scripts/h200.sh flashmla``, from a bundle made by ``scripts/flashmla_bundle.sh``
and carried in ``.gpu/flashmla``; nothing of it is committed).  This module imports the built
package from ``$KFORGE_FLASHMLA_DIR`` (default ``/tmp/kforge-gpu/FlashMLA``) when plain
``import flash_mla`` fails.

Mapping of our contract onto FlashMLA's (``flash_mla/flash_mla_interface.py`` at 9241ae3):

* ``q [b, s, h, 576]`` as is; the cache ``[num_blocks, 64, 576]`` viewed as
  ``[num_blocks, 64, 1, 576]`` (one latent KV head, no copy); ``block_table`` and
  ``cache_seqlens`` as is; ``head_dim_v = 512``; ``softmax_scale`` passed through.
* causal for s > 1: FlashMLA aligns the mask to the end of the cache (query i of s sees
  ``seqlen - s + i``), which is our contract; s = 1 runs with ``causal=False`` (one query row
  sees the whole cache either way).
* scheduling: the ``FlashMLASchedMeta`` object is filled on its first call and may be reused
  only while the shapes and the sequence lengths stay the same; it is kept per (shapes,
  block table, lengths) and rebuilt when a new or modified lengths tensor comes in (object
  identity and torch's in-place version counter, never the pointer alone).  The first call
  (metadata kernel, allocations) runs in :func:`prepare`, untimed.
* outputs: FlashMLA allocates its own ``out`` and ``lse`` and has no argument to write into
  ours, so ``run`` copies them into the buffers the harness passed, inside the timed call (at
  b=32: 4.2 MB of ``out`` on decode, 67 MB on spec); :func:`notes` gives FlashMLA's call
  alone, timed the same way, beside it.  Its ``lse`` is ``[b, h, s]`` in natural log, like ours.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Mapping
from typing import Any

from benchmarks.peers import same_tensor

D_V = 512
PAGE = 64
DEFAULT_DIR = "/tmp/kforge-gpu/FlashMLA"

_STATE: dict[str, Any] = {}  # "meta": the current scheduling entry
_NOTES: dict[str, str] = {}


def _import() -> Any:
    """The ``flash_mla`` package, from the environment or from the built source tree."""
    try:
        import flash_mla
    except ImportError:
        where = os.environ.get("KFORGE_FLASHMLA_DIR", DEFAULT_DIR)
        if not os.path.isdir(os.path.join(where, "flash_mla")):
            raise
        sys.path.insert(0, where)
        import flash_mla
    return flash_mla


def available(config: Mapping[str, Any] | None = None) -> str | None:
    """Why this peer cannot run here (one line), or None."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "FlashMLA needs a CUDA GPU and torch.cuda.is_available() is False here"
    if torch.cuda.get_device_capability()[0] != 9:
        major, minor = torch.cuda.get_device_capability()
        return f"this peer runs FlashMLA's sm90 dense decode, and this GPU is sm_{major}{minor}"
    try:
        mod = _import()
    except Exception as exc:  # noqa: BLE001 - any import failure means "not runnable here"
        return (f"flash_mla is not importable ({type(exc).__name__}: {exc}); build it on the GPU machine "
                f"with `bash scripts/h200.sh flashmla` (bundle: scripts/flashmla_bundle.sh)")
    if not hasattr(mod, "flash_mla_with_kvcache") or not hasattr(mod, "get_mla_metadata"):
        return "this flash_mla has no flash_mla_with_kvcache/get_mla_metadata; build FlashMLA at 9241ae3"
    return None


def supports(params: Mapping[str, int], *, device: str = "cuda",
             config: Mapping[str, Any] | None = None) -> str | None:
    """Why FlashMLA cannot compute our contract for ``params`` on ``device`` (one line), or None."""
    if not str(device).startswith("cuda"):
        return f"FlashMLA runs on CUDA tensors only and this run uses device {device!r}"
    return None


def notes() -> dict[str, str]:
    """What the peer does beyond the kernel call (for the comparison report)."""
    return dict(_NOTES)


def _meta(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, causal: bool) -> dict[str, Any]:
    """The scheduling entry for these inputs (a fresh ``FlashMLASchedMeta`` when they changed)."""
    key = (tuple(q.shape), tuple(kv_cache.shape), tuple(block_table.shape), causal, str(q.device))
    cur = _STATE.get("meta")
    if (cur is not None and cur["key"] == key and same_tensor(cur["sl"], cur["sl_ver"], cache_seqlens)
            and same_tensor(cur["bt"], cur["bt_ver"], block_table)):
        return cur
    sched, _ = _import().get_mla_metadata()
    cur = _STATE["meta"] = {"key": key, "sched": sched, "sl": weakref.ref(cache_seqlens),
                            "sl_ver": cache_seqlens._version, "bt": weakref.ref(block_table),
                            "bt_ver": block_table._version, "called": False}
    return cur


def _check_device(q: Any) -> None:
    if q.device.type != "cuda":
        raise ValueError(f"flashmla got tensors on {q.device}, but FlashMLA needs CUDA tensors; "
                         f"build the inputs with device='cuda'")


def _call(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, softmax_scale: float) -> tuple[Any, Any]:
    _check_device(q)
    s = int(q.shape[1])
    causal = s > 1
    entry = _meta(q, kv_cache, block_table, cache_seqlens, causal)
    k = kv_cache.view(kv_cache.shape[0], PAGE, 1, kv_cache.shape[-1])
    got = _import().flash_mla_with_kvcache(q, k, block_table, cache_seqlens, D_V, entry["sched"], None,
                                           softmax_scale=float(softmax_scale), causal=causal)
    entry["called"] = True
    return got[0], got[1]


def prepare(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, softmax_scale: float, *,
            config: Mapping[str, Any] | None = None) -> None:
    """First call for these inputs (fills FlashMLA's scheduling metadata), untimed by the harness; then
    FlashMLA's call alone is timed here (20 rounds) for the note beside the row."""
    entry = _meta(q, kv_cache, block_table, cache_seqlens, int(q.shape[1]) > 1)
    if entry["called"]:
        return
    _call(q, kv_cache, block_table, cache_seqlens, softmax_scale)
    b, s, h, _ = q.shape
    mb = b * s * h * D_V * q.element_size() / 1e6
    alone = ""
    if q.is_cuda:  # (the CPU tests run a stand-in module)
        from pytest_kforge.timing import median_device_us

        # the row's conditions (L2 flushed before each round), so a reader sees what the copy costs
        us = median_device_us(lambda: _call(q, kv_cache, block_table, cache_seqlens, softmax_scale),
                              device=str(q.device), rounds=20)
        alone = f"; FlashMLA's call alone, without the copy: {us:.1f} us (the same timer, L2 flushed, median of 20)"
    _NOTES[f"out b={b} s={s}"] = (f"FlashMLA writes its own out/lse; they are copied into the harness's buffers inside "
                     f"the timed call ({mb:.1f} MB of out read and written at b={b}, s={s}{alone})")


def run(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, softmax_scale: float, *,
        out: Any, lse: Any, config: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    o, lse_values = _call(q, kv_cache, block_table, cache_seqlens, softmax_scale)
    out.copy_(o)
    lse.copy_(lse_values)
    return out, lse
