"""Fused RMSNorm + fp8 quantisation, per token and per 128-wide group (DeepSeek-V3's activation format).

For a bf16 activation ``x [t, d]`` and a bf16 weight ``w [d]``::

    y[i, :]   = x[i, :] * rsqrt(mean(x[i, :]^2) + eps) * w          (float32 math)
    amax[i,g] = max(|y[i, 128 g : 128 (g+1)]|), at least 1e-10
    scale[i,g] = amax[i,g] / 448                                    (448: the largest float8_e4m3fn)
    q[i, j]   = float8_e4m3fn(y[i, j] / scale[i, j // 128])          (round to nearest even)

so ``q * scale`` restores ``y`` to within one fp8 step.  This is what a serving engine runs before
every fp8 GEMM of a DeepSeek-V3 layer (the norm of the hidden state, d = 7168, feeding the
per-token-group fp8 projections): a memory-bound row reduction whose output is a quarter of its
input's bytes smaller, unlike MLA decode (a tensor-core kernel whose bound is the KV data path).

How the outputs are checked (:meth:`RmsNormFp8Spec.compare`): ``scale`` against the float64
reference to 1e-5 relative (the kernel computes the same float32 quantities); ``q`` in units of the
*reference* scale against the unrounded quotient ``y / scale``: each element within one fp8 step
(``2**-8 + 2**-3 * |want|``: a tie may round either way), and the relative L2 error at most 0.032.
Honest round-to-nearest gives 0.0257 on these inputs; rounding toward zero (a cheaper cast) gives
~0.05 and fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_kforge.spec import CompareResult, KernelSpec, Tolerance, compare_outputs

GROUP = 128
FP8_MAX = 448.0
AMAX_FLOOR = 1e-10


class RmsNormFp8Spec(KernelSpec):
    name = "rmsnorm_fp8"
    description = "fused RMSNorm + per-token-group (1x128) float8_e4m3fn quantisation of a bf16 activation"
    tags = ("rmsnorm", "fp8-quant", "row-reduction", "memory-bound")
    input_names = ("x", "weight", "eps")
    output_names = ("q", "scale")
    trials = {
        # a prefill chunk of DeepSeek-V3's hidden state: 16384 tokens x 7168 (235 MB in, 118 MB out)
        "prefill": {"t": 16384, "d": 7168},
        # a decode step of 128 sequences: 1.8 MB in; latency, not bandwidth, decides it
        "decode": {"t": 128, "d": 7168},
        # the q_lora_rank norm (d = 1536) of the same prefill chunk: narrow rows, many of them
        "qlora": {"t": 16384, "d": 1536},
    }
    default_trials = ("prefill", "decode")
    shrink_param = "t"
    tolerances = {
        "q": Tolerance(max_abs=2**-8, rel_l2=0.032, rel_elem=2**-3),
        "scale": Tolerance(max_abs=0.0, rel_l2=1e-5, rel_elem=1e-5),
    }

    def make_inputs(self, params: Mapping[str, int], *, seed: int, device: Any = "cpu",
                    zero_rows: int = 0) -> dict[str, Any]:
        """Gaussian rows whose magnitudes differ by e^N(0,1) (so every row's scale differs), a weight
        near 1; ``zero_rows`` (fuzzing) sets the first rows to exact zeros (amax takes its floor)."""
        import torch

        t, d = self._shape(params)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        mag = torch.exp(torch.randn(t, 1, generator=gen))
        x = (torch.randn(t, d, generator=gen) * mag).to(torch.bfloat16)
        if zero_rows:
            x[: min(int(zero_rows), t)] = 0
        w = (1.0 + 0.1 * torch.randn(d, generator=gen)).to(torch.bfloat16)
        return {"x": x.to(device), "weight": w.to(device), "eps": 1e-6}

    def params_from_inputs(self, inputs: Mapping[str, Any]) -> dict[str, int]:
        t, d = inputs["x"].shape
        return {"t": int(t), "d": int(d)}

    def alloc_outputs(self, params: Mapping[str, int], *, device: Any = "cpu") -> dict[str, Any]:
        import torch

        t, d = self._shape(params)
        return {"q": torch.empty(t, d, dtype=torch.float8_e4m3fn, device=device),
                "scale": torch.empty(t, d // GROUP, dtype=torch.float32, device=device)}

    def reference(self, inputs: Mapping[str, Any], *, dtype: Any = None) -> dict[str, Any]:
        """``q`` unrounded (``y / scale`` in ``dtype``, float32 by default) and ``scale``."""
        import torch

        dt = dtype or torch.float32
        x = inputs["x"].to(dt)
        t, d = x.shape
        r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + float(inputs["eps"]))
        y = (x * r * inputs["weight"].to(dt)).view(t, d // GROUP, GROUP)
        scale = y.abs().amax(dim=-1).clamp(min=AMAX_FLOOR) / FP8_MAX
        return {"q": (y / scale[..., None]).view(t, d), "scale": scale}

    def compare(self, outputs: Mapping[str, Any], ref: Mapping[str, Any]) -> list[CompareResult]:
        # q is compared as stored (fp8 -> float64) with the unrounded quotient: see the module docstring
        return [compare_outputs("q", outputs["q"], ref["q"], self.tolerances["q"]),
                compare_outputs("scale", outputs["scale"], ref["scale"], self.tolerances["scale"])]

    def flops(self, params: Mapping[str, int]) -> float:
        t, d = self._shape(params)
        return 6.0 * t * d  # square+add, * rsqrt, * w, |.| max, / scale (the cast is not a flop)

    def min_bytes(self, params: Mapping[str, int]) -> float:
        t, d = self._shape(params)
        return 2.0 * t * d + 2.0 * d + 1.0 * t * d + 4.0 * t * (d // GROUP)

    def small_params(self, params: Mapping[str, int], cap: int = 256, batch_cap: int = 4) -> dict[str, int]:
        # d must stay a multiple of the group: cap it at 1024 (8 groups) instead of ``cap``
        return {"t": min(int(params["t"]), 64), "d": min(int(params["d"]), 1024)}

    @staticmethod
    def _shape(params: Mapping[str, int]) -> tuple[int, int]:
        t, d = int(params["t"]), int(params["d"])
        if t < 1 or d < GROUP or d % GROUP:
            raise ValueError(f"rmsnorm_fp8 needs t >= 1 and d a multiple of {GROUP}, got t={t}, d={d}")
        return t, d


SPEC = RmsNormFp8Spec()
