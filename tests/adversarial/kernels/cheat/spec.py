"""A tiny row softmax used by the adversarial suite: every v* beside it except v0 cheats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_kforge.spec import KernelSpec, Tolerance


class CheatSoftmaxSpec(KernelSpec):
    name = "cheat"
    description = "row softmax (fixture for cheat detection)"
    input_names = ("x",)
    output_names = ("y",)
    trials = {"small": {"rows": 16, "cols": 64}}
    default_trials = ("small",)
    shrink_param = "rows"
    tolerances = {"y": Tolerance(max_abs=2e-3, rel_l2=1e-2)}

    def make_inputs(self, params: Mapping[str, int], *, seed: int, device: Any = "cpu") -> dict[str, Any]:
        import torch

        gen = torch.Generator(device="cpu").manual_seed(seed)
        return {"x": (torch.randn(params["rows"], params["cols"], generator=gen) * 3.0).to(device)}

    def params_from_inputs(self, inputs: Mapping[str, Any]) -> dict[str, int]:
        rows, cols = inputs["x"].shape
        return {"rows": int(rows), "cols": int(cols)}

    def alloc_outputs(self, params: Mapping[str, int], *, device: Any = "cpu") -> dict[str, Any]:
        import torch

        return {"y": torch.empty(params["rows"], params["cols"], dtype=torch.float32, device=device)}

    def reference(self, inputs: Mapping[str, Any], *, dtype: Any = None) -> dict[str, Any]:
        import torch

        return {"y": torch.softmax(inputs["x"].to(dtype or torch.float32), dim=-1)}

    def flops(self, params: Mapping[str, int]) -> float:
        return 5.0 * params["rows"] * params["cols"]

    def min_bytes(self, params: Mapping[str, int]) -> float:
        return 8.0 * params["rows"] * params["cols"]


SPEC = CheatSoftmaxSpec()
