"""v0: the reference in float32 torch, rounded to fp8 -- the baseline on every machine.

Several eager kernels on a GPU (square, mean, rsqrt, two multiplies, abs, amax, divide, cast), each
reading and writing the whole activation: the torch a user writes before fusing anything.
"""

from __future__ import annotations

from typing import Any

LANGUAGE = "torch"
PARENT = None
DESCRIPTION = "torch float32 RMSNorm, group amax and fp8 cast as separate eager ops, the baseline"
CONFIG: dict[str, Any] = {}


def run(x, weight, eps, *, q, scale, config=None):
    import torch

    from kforge_kernels.rmsnorm_fp8.spec import FP8_MAX, SPEC

    ref = SPEC.reference({"x": x, "weight": weight, "eps": eps}, dtype=torch.float32)
    q.copy_(ref["q"].clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn))
    scale.copy_(ref["scale"])
    return q, scale
