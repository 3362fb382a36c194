"""Row softmax: ``y = softmax(x, dim=-1)`` over a [rows, cols] bf16 matrix, in float32 math.

A second, tiny kernel that proves the registry and the harness are not MLA-specific.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_kforge.spec import KernelSpec, Tolerance


class RowSoftmaxSpec(KernelSpec):
    name = "softmax"
    description = "row softmax of a bf16 matrix (float32 math, bf16 out)"
    tags = ("softmax", "row-reduction", "memory-bound")
    input_names = ("x",)
    output_names = ("y",)
    trials = {
        "wide": {"rows": 4096, "cols": 8192},
        "tall": {"rows": 65536, "cols": 1024},
    }
    default_trials = ("wide", "tall")
    shrink_param = "rows"
    tolerances = {"y": Tolerance(max_abs=2e-3, rel_l2=1e-2)}

    def make_inputs(self, params: Mapping[str, int], *, seed: int, device: Any = "cpu") -> dict[str, Any]:
        import torch

        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = (torch.randn(params["rows"], params["cols"], generator=gen) * 3.0).to(torch.bfloat16)
        return {"x": x.to(device)}

    def params_from_inputs(self, inputs: Mapping[str, Any]) -> dict[str, int]:
        rows, cols = inputs["x"].shape
        return {"rows": int(rows), "cols": int(cols)}

    def alloc_outputs(self, params: Mapping[str, int], *, device: Any = "cpu") -> dict[str, Any]:
        import torch

        return {"y": torch.empty(params["rows"], params["cols"], dtype=torch.bfloat16, device=device)}

    def reference(self, inputs: Mapping[str, Any], *, dtype: Any = None) -> dict[str, Any]:
        import torch

        return {"y": torch.softmax(inputs["x"].to(dtype or torch.float32), dim=-1)}

    def flops(self, params: Mapping[str, int]) -> float:
        return 5.0 * params["rows"] * params["cols"]  # max, sub, exp, sum, div

    def min_bytes(self, params: Mapping[str, int]) -> float:
        return 2.0 * 2 * params["rows"] * params["cols"]


SPEC = RowSoftmaxSpec()
