"""Peer: RMSNorm + per-token-group fp8 quantisation as a user writes it in torch, eager or compiled.

``config["mode"]``:

* ``"eager"`` (peer ``torch_eager``): float32 torch ops, one kernel each (what v0 runs, written
  here without the spec so the peer stands alone);
* ``"compile"`` (peer ``torch_compile``): the same function through ``torch.compile`` (Inductor
  fuses it into generated Triton kernels); compiled once per shape on the first call, which the
  harness's warm-up absorbs (``prepare`` does it untimed when called).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP, FP8_MAX = 128, 448.0
_COMPILED: dict[str, Any] = {}


def _quant(x: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    import torch

    t, d = x.shape
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    g = y.view(t, d // GROUP, GROUP)
    amax = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-10)
    q = (g * (FP8_MAX / amax)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(t, d), (amax / FP8_MAX).squeeze(-1)


def available(config: Mapping[str, Any] | None = None) -> str | None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return "torch is not installed; pip install torch"
    if (config or {}).get("mode") == "compile" and not hasattr(torch, "compile"):
        return "this torch has no torch.compile"
    return None


def supports(params: Mapping[str, int], *, device: str = "cuda", config: Mapping[str, Any] | None = None) -> str | None:
    if (config or {}).get("mode") == "compile" and not str(device).startswith("cuda"):
        return "torch.compile is timed on a GPU only (Inductor's CPU code is not the comparison)"
    return None


def _fn(config: Mapping[str, Any] | None) -> Any:
    if (config or {}).get("mode") != "compile":
        return _quant
    if "fn" not in _COMPILED:
        import torch

        _COMPILED["fn"] = torch.compile(_quant, dynamic=False)
    return _COMPILED["fn"]


def prepare(x: Any, weight: Any, eps: float, *, q: Any = None, scale: Any = None,
            config: Mapping[str, Any] | None = None) -> None:
    _fn(config)(x, weight, eps)  # compiles for this shape, untimed


def run(x: Any, weight: Any, eps: float, *, q: Any, scale: Any, config: Mapping[str, Any] | None = None):
    qq, ss = _fn(config)(x, weight, eps)
    q.copy_(qq)
    scale.copy_(ss)
    return q, scale
