"""Checking one version on one shape: the checks a cheating or sloppy kernel must not pass.

For each call the harness
  1. builds fresh random inputs from a seed and snapshots every input tensor,
  2. poisons the outputs (NaN / most negative integer) so unwritten elements fail,
  3. calls the version, then checks that it returned the *very* output tensors passed in
     (same storage, shape and strides: catches lazily substituted or cached results),
  4. checks that no input changed (catches kernels that scribble on their inputs),
  5. compares with the spec's reference in float64 for small shapes, float32 otherwise
     (NaN/Inf fails; the message gives max abs / rel-L2 error and the worst index),
  6. repeats 1-5 on a second set of fresh inputs reusing the *same* output buffers
     (catches results cached by pointer or shape).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .gpushare import gpu_section
from .spec import inputs_to

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version

__all__ = ["CheckReport", "check_version", "run_once", "ref_dtype_for", "SMALL_FLOPS"]

#: below this many FLOPs the reference runs in float64
SMALL_FLOPS = 2e9


@dataclasses.dataclass
class CheckReport:
    """Outcome of :func:`check_version`; ``message`` is empty when ``ok``."""

    ok: bool
    message: str
    seeds: tuple[int, ...]
    ref_dtype: str

    def __bool__(self) -> bool:
        return self.ok


def ref_dtype_for(version: Version, params: Mapping[str, int]) -> Any:
    import torch

    try:
        small = version.spec.flops(params) < SMALL_FLOPS
    except (KeyError, TypeError, NotImplementedError):
        small = False
    return torch.float64 if small else torch.float32


def _snapshot(inputs: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    return {k: v.detach().clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def _sync(device: Any) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def run_once(version: Version, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[str]:
    """Poison ``outputs``, call the version, return the contract problems found (empty: none)."""
    from .spec import poison_

    spec = version.spec
    poison_(outputs)
    before = _snapshot(inputs)
    returned = version.fn(**inputs, **outputs, config=dict(version.config))
    device = next(iter(outputs.values())).device
    _sync(device)
    problems: list[str] = []
    if not isinstance(returned, (tuple, list)) or len(returned) != len(spec.output_names):
        problems.append(f"{version.name} returned {type(returned).__name__} but must return a tuple of its "
                        f"{len(spec.output_names)} output tensors ({', '.join(spec.output_names)})")
    else:
        for name, got in zip(spec.output_names, returned):
            want = outputs[name]
            same = got is want or (
                hasattr(got, "data_ptr") and got.data_ptr() == want.data_ptr()
                and tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
                and got.dtype == want.dtype
            )
            if not same:
                problems.append(f"{version.name} returned a tensor for {name!r} that is not the output buffer "
                                f"passed in; it must write into `{name}` and return that tensor")
    import torch

    for name, snap in before.items():
        now = inputs[name]
        if not torch.equal(now, snap):
            problems.append(f"{version.name} modified its input {name!r}; inputs must be read-only")
    return problems


def check_version(
    version: Version,
    params: Mapping[str, int],
    *,
    seed: int,
    device: Any,
    input_kwargs: Mapping[str, Any] | None = None,
    repeats: int = 2,
) -> CheckReport:
    """Run steps 1-6 of the module docstring; ``repeats`` fresh input sets share one output buffer.

    On a GPU shared by several xdist workers it all runs as one exclusive GPU section
    (:func:`~pytest_kforge.gpushare.gpu_section`: the version's ``prepare`` first, outside the lock), except
    the inputs' random values, which are made on the host before it (:func:`~pytest_kforge.spec.inputs_to`).
    """
    spec = version.spec
    dtype = ref_dtype_for(version, params)
    seeds = tuple(seed + i for i in range(repeats))
    host = [spec.make_inputs(params, seed=s, device="cpu", **dict(input_kwargs or {})) for s in seeds]
    with gpu_section(version, params, input_kwargs):
        outputs = spec.alloc_outputs(params, device=device)
        for i, s in enumerate(seeds):
            inputs = inputs_to(host[i], device)
            problems = run_once(version, inputs, outputs)
            where = f"call {i + 1} of {repeats} (seed {s}{', reusing the output buffers' if i else ''})"
            if problems:
                return CheckReport(False, f"{where}: " + "; ".join(problems), seeds, str(dtype))
            ref = spec.reference(inputs, dtype=dtype)
            bad = [r.message for r in spec.compare(outputs, ref) if not r.ok]
            if bad:
                hint = " (the first call passed: outputs look cached across calls)" if i else ""
                return CheckReport(False, f"{where}: " + "; ".join(bad) + hint, seeds, str(dtype))
    return CheckReport(True, "", seeds, str(dtype))
