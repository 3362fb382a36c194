"""The call contract every rmsnorm_fp8 version checks before it launches (DSL-independent)."""

from __future__ import annotations

from typing import Any

from kforge_kernels.rmsnorm_fp8.spec import GROUP


def check(x: Any, weight: Any, q: Any, scale: Any) -> tuple[int, int]:
    """(t, d) of a call, or ValueError (one sentence) when the tensors break the contract."""
    import torch

    if not (x.is_cuda and weight.is_cuda and q.is_cuda and scale.is_cuda):
        raise ValueError("this version runs on a CUDA GPU: pass CUDA tensors (v0 runs anywhere).")
    if x.dim() != 2 or x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError(f"x must be a 2-D bfloat16 tensor and weight bfloat16 (got {x.dtype} {tuple(x.shape)}, "
                         f"{weight.dtype}); cast them first.")
    t, d = (int(n) for n in x.shape)
    if d % GROUP or tuple(weight.shape) != (d,):
        raise ValueError(f"x's width must be a multiple of {GROUP} and weight of shape [{d}] (got x {tuple(x.shape)}, "
                         f"weight {tuple(weight.shape)}).")
    if q.dtype != torch.float8_e4m3fn or tuple(q.shape) != (t, d) or scale.dtype != torch.float32 \
            or tuple(scale.shape) != (t, d // GROUP):
        raise ValueError(f"q must be float8_e4m3fn [{t}, {d}] and scale float32 [{t}, {d // GROUP}].")
    for name, ten in (("x", x), ("weight", weight), ("q", q), ("scale", scale)):
        if not ten.is_contiguous() or ten.data_ptr() % 16:
            raise ValueError(f"{name} must be contiguous and 16-byte aligned; pass {name}.contiguous().")
    return t, d
