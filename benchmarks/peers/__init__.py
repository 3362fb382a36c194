"""Peers: outside implementations of a kernel, callable exactly like one of its versions.

A peer module defines, for its kernel's contract (MLA's here, ``kernels/mla/spec.py``)::

    available(config=None) -> str | None      # why it cannot run here (one line), or None
    prepare(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, config=None) -> None
                                               # untimed set-up (plans, gathers); optional
    run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None) -> (out, lse)
    supports(params, *, device="cuda", config=None) -> str | None
                                               # optional: why a shape/device cannot run (one line)

``run`` must also work without ``prepare`` (it prepares lazily on the first call, which the
harness's warm-up absorbs), so the core harness's correctness checks and timer apply unchanged.
:data:`PEERS` names each runnable peer: a module plus the config it is called with.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["Peer", "PeerVersion", "PEERS", "get_peer", "same_tensor"]


@dataclasses.dataclass(frozen=True)
class Peer:
    """One named peer: ``module`` (under ``benchmarks.peers``) called with ``config``."""

    name: str
    kernel: str
    module: str
    config: Mapping[str, Any]
    description: str

    def load(self) -> ModuleType:
        return importlib.import_module(f"{__name__}.{self.module}")

    def available(self) -> str | None:
        try:
            mod = self.load()
        except Exception as exc:  # noqa: BLE001 - any import failure means "not runnable here"
            return f"benchmarks.peers.{self.module} failed to import: {type(exc).__name__}: {exc}"
        return mod.available(dict(self.config))

    def prepare(self, **inputs: Any) -> None:
        mod = self.load()
        if hasattr(mod, "prepare"):
            mod.prepare(**inputs, config=dict(self.config))

    def run(self, *, config: Mapping[str, Any] | None = None, **tensors: Any) -> tuple[Any, ...]:
        cfg = dict(self.config)
        cfg.update(config or {})
        return tuple(self.load().run(**tensors, config=cfg))


class PeerVersion:
    """A peer duck-typed as a :class:`pytest_kforge.registry.Version` (name, spec, config, fn, supports,
    toolchain_missing), for the correctness checker (``benchmarks.compare``) and the profile driver."""

    module = None  # a peer has no ahead-of-time ``prepare(params, config)``; its own prepare takes the inputs

    def __init__(self, peer: Peer, spec: Any, device: str = "cuda") -> None:
        self.peer = peer
        self.name = peer.name
        self.spec = spec
        self.config = dict(peer.config)
        self.device = device
        self._module = peer.load()
        self.fn = self._module.run

    def bind(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> Callable[[], Any]:
        """The peer's run on these tensors (planned by its ``prepare``, outside the timed call)."""
        fn, tensors, cfg = self.fn, {**inputs, **outputs}, dict(self.config)
        return lambda: fn(**tensors, config=cfg)

    def toolchain_missing(self) -> Exception | None:
        return None  # a peer that cannot run here says so through supports(), not as a DSL toolchain

    def supports(self, params: Mapping[str, int]) -> str | None:
        """The peer module's ``supports(params, device=, config=)`` (optional): why it cannot compute the
        contract for this shape/device, so the cell is skipped instead of wrong.  (Whether the peer is
        available at all is :meth:`Peer.available`, asked before.)"""
        check = getattr(self._module, "supports", None)
        return check(params, device=self.device, config=self.config) if check else None


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("torch_bmm", "mla", "torch_bmm", {"gather": "inside"},
             "torch bf16 bmm + fp32 softmax; paged cache gathered inside the timed call"),
        Peer("torch_bmm_contig", "mla", "torch_bmm", {"gather": "cached"},
             "torch bf16 bmm + fp32 softmax on a contiguous cache gathered once, untimed"),
        Peer("flashinfer_fa3", "mla", "flashinfer_mla", {"backend": "fa3"},
             "FlashInfer 0.5.3 BatchMLAPagedAttentionWrapper, backend fa3 (Hopper)"),
        Peer("flashinfer_fa2", "mla", "flashinfer_mla", {"backend": "fa2"},
             "FlashInfer 0.5.3 BatchMLAPagedAttentionWrapper, backend fa2"),
        Peer("torch_eager", "rmsnorm_fp8", "torch_rmsnorm_fp8", {"mode": "eager"},
             "torch float32 eager ops (rsqrt, mean, amax, cast): one kernel per op"),
        Peer("torch_compile", "rmsnorm_fp8", "torch_rmsnorm_fp8", {"mode": "compile"},
             "the same torch function through torch.compile (Inductor-generated Triton kernels)"),
        Peer("flashmla", "mla", "flashmla", {},
             "DeepSeek FlashMLA (9241ae3) dense decode, sm90; built from source on the GPU machine"),
    )
}


def get_peer(name: str) -> Peer:
    try:
        return PEERS[name]
    except KeyError:
        raise KeyError(f"unknown peer {name!r}; known peers: {', '.join(PEERS)}; "
                       f"add one to benchmarks/peers/__init__.py") from None


def same_tensor(ref: Any, ver: int, tensor: Any) -> bool:
    """Whether ``tensor`` is the object ``ref`` (a weakref) was taken of, unmodified since: torch's
    in-place version counter still ``ver``.  Peers key their untimed set-up (plans, gathers) on this,
    never on a pointer alone, which a new tensor can reuse."""
    return ref is not None and ref() is tensor and ver == tensor._version
