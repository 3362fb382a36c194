"""The kernel-spec data model: what a kernel computes, on which trial configs, checked how.

A kernel lives in ``kernels/<name>/`` as a package whose ``spec.py`` defines ``SPEC``, an
instance of a :class:`KernelSpec` subclass, and whose ``v*.py`` modules are its versions
(see :mod:`pytest_kforge.registry`).  The spec owns everything that does not depend on a
version: input generation from a seed, the float32/float64 reference, output allocation,
tolerances, and the exact FLOP and minimal-byte counts used for roofline figures.

torch is imported lazily so that option parsing and ``--help`` stay fast.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "Roofline",
    "TrialConfig",
    "Tolerance",
    "KernelSpec",
    "CompareResult",
    "compare_outputs",
    "inputs_to",
]

_PARAM_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class TrialConfig:
    """One point of a kernel's trial matrix, e.g. ``decode`` = ``{b: 32, s: 1, t: 4096, h: 128}``.

    ``id`` is what pytest shows: ``decode-b32-s1-t4096-h128``.  ``note`` records what the
    harness changed on the way (for example "b halved from 32 to 16: out of GPU memory").
    """

    name: str
    params: Mapping[str, int]
    note: str = ""

    def __post_init__(self) -> None:
        for key in self.params:
            if not _PARAM_RE.match(key):
                raise ValueError(f"trial {self.name!r}: parameter name {key!r} must be lower-case letters, digits or _")

    @property
    def id(self) -> str:
        return "-".join([self.name, *(f"{k}{v}" for k, v in self.params.items())])

    def with_params(self, note: str = "", **changes: int) -> TrialConfig:
        return self.replaced(changes, note=note)

    def replaced(self, changes: Mapping[str, int], *, note: str = "") -> TrialConfig:
        """This config with ``changes`` to its params (``with_params`` for a mapping of them)."""
        params = dict(self.params)
        params.update(changes)
        return TrialConfig(self.name, params, note=note or self.note)

    def __getitem__(self, key: str) -> int:
        return self.params[key]


@dataclasses.dataclass(frozen=True)
class Roofline:
    """Measured ceilings of the machine; the H200's by default (see the devlog for how measured)."""

    bandwidth_bytes_per_s: float = 4.3e12
    flops_per_s: float = 790e12

    def floor_s(self, flops: float, nbytes: float) -> float:
        """The larger of the compute time and the memory time: no correct kernel runs faster."""
        return max(flops / self.flops_per_s, nbytes / self.bandwidth_bytes_per_s)

    def bound(self, flops: float, nbytes: float) -> str:
        return "compute" if flops / self.flops_per_s >= nbytes / self.bandwidth_bytes_per_s else "memory"


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Error limits for one output, fit for its dtype.

    ``rel_l2`` bounds ``||out - ref|| / ||ref||``; every element must satisfy
    ``|out - ref| <= max_abs + rel_elem * |ref|``; all must hold, every element must be finite,
    and the output must have been written.  ``rel_elem`` is for low-precision outputs whose
    rounding step grows with the value: a bf16 output of 22.7 cannot be nearer than 0.0625 to
    its reference (run 14: a page of large keys made every correct CuTe kernel fail a
    ``max_abs=0.03`` bound), so ``rel_elem=2**-7`` (one to two bf16 steps, 2-4x the rounding error)
    keeps the bound honest there.
    """

    max_abs: float
    rel_l2: float
    rel_elem: float = 0.0


@dataclasses.dataclass(frozen=True)
class CompareResult:
    """Outcome of comparing one output with its reference."""

    name: str
    ok: bool
    max_abs: float
    rel_l2: float
    worst_index: tuple[int, ...]
    got: float
    want: float
    n_nonfinite: int
    message: str


class KernelSpec:
    """Base class of a kernel's spec.  Subclasses set the class attributes and implement the methods.

    The harness calls a version as ``fn(**inputs, **outputs, config=config)`` where ``inputs`` come
    from :meth:`make_inputs` and ``outputs`` from :meth:`alloc_outputs` (already poisoned with NaN);
    the version writes into the given outputs and returns them as a tuple in :attr:`output_names`
    order.  Scalars (a softmax scale, say) are passed among the inputs as plain Python numbers.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: contexts the knowledge base matches entries on (``applies_to``), e.g. ("mla", "online-softmax")
    tags: ClassVar[tuple[str, ...]] = ()
    input_names: ClassVar[tuple[str, ...]]
    output_names: ClassVar[tuple[str, ...]]
    #: the default trial matrix: name -> params; ``default_trials`` picks the ones run unless asked.
    trials: ClassVar[Mapping[str, Mapping[str, int]]]
    default_trials: ClassVar[tuple[str, ...]]
    #: the parameter halved (and reported) when a trial config does not fit in GPU memory.
    shrink_param: ClassVar[str | None] = "b"
    tolerances: ClassVar[Mapping[str, Tolerance]]

    # ---- to implement ---------------------------------------------------------------------
    def make_inputs(self, params: Mapping[str, int], *, seed: int, device: str | torch.device) -> dict[str, Any]:
        """Random inputs (never zeros) for ``params``, reproducible from ``seed``."""
        raise NotImplementedError

    def alloc_outputs(self, params: Mapping[str, int], *, device: str | torch.device) -> dict[str, torch.Tensor]:
        """Uninitialised output tensors of the right shapes and dtypes (the harness poisons them)."""
        raise NotImplementedError

    def reference(self, inputs: Mapping[str, Any], *, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        """The outputs computed in ``dtype`` (float32 by default; float64 for checks)."""
        raise NotImplementedError

    def flops(self, params: Mapping[str, int]) -> float:
        raise NotImplementedError

    def min_bytes(self, params: Mapping[str, int]) -> float:
        """Fewest bytes any implementation must move through device memory."""
        raise NotImplementedError

    # ---- provided ---------------------------------------------------------------------------
    def trial(self, name: str) -> TrialConfig:
        try:
            return TrialConfig(name, dict(self.trials[name]))
        except KeyError:
            raise KeyError(f"kernel {self.name!r} has no trial {name!r}; it has: {', '.join(self.trials)}") from None

    def floor_s(self, params: Mapping[str, int], roofline: Roofline | None = None) -> float:
        return (roofline or Roofline()).floor_s(self.flops(params), self.min_bytes(params))

    def small_params(self, params: Mapping[str, int], cap: int = 256, batch_cap: int = 4) -> dict[str, int]:
        """A CPU-sized version of ``params``: ``shrink_param`` capped at ``batch_cap``, the rest at
        ``cap``.  Override in a spec for a better choice."""
        return {k: min(int(v), batch_cap if k == self.shrink_param else cap) for k, v in params.items()}

    def hypothesis_params(self, *, small: bool = False) -> Any:
        """A hypothesis strategy of ``{"params": {...}, "input_kwargs": {...}}`` for fuzzing, or None.

        ``input_kwargs`` are passed to :meth:`make_inputs` (e.g. per-sequence lengths); ``small``
        asks for CPU-sized shapes.  The default delegates to ``hypothesis_params(spec, small=...)``
        in ``kernels/<name>/fuzz.py`` when that module exists, so shape strategies stay beside the
        kernel; override it in the spec instead if you prefer.
        """
        import importlib

        modname = type(self).__module__.rpartition(".")[0] + ".fuzz"
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name == modname:
                return None
            raise
        return mod.hypothesis_params(self, small=small)

    def compare(self, outputs: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor]) -> list[CompareResult]:
        return [compare_outputs(n, outputs[n], ref[n], self.tolerances[n]) for n in self.output_names]


def inputs_to(inputs: Mapping[str, Any], device: Any) -> dict[str, Any]:
    """``inputs`` with every tensor moved to ``device`` (other values kept as they are).

    Inputs are made on the host (``make_inputs(..., device="cpu")``, random generation: seconds at a trial's
    size) before a shared GPU's lock is taken, and only this copy runs under it (see
    :mod:`pytest_kforge.gpushare`); every spec in the project makes its values on the host and moves
    them, so the values are the same as ``make_inputs(..., device=device)``'s.
    """
    import torch

    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def poison_(tensors: Mapping[str, torch.Tensor] | Sequence[torch.Tensor]) -> None:
    """Fill outputs with NaN (floats) or the most negative value (integers) so unwritten elements fail."""
    import torch

    items = tensors.values() if isinstance(tensors, Mapping) else tensors
    for t in items:
        if t.is_floating_point():
            t.fill_(float("nan"))
        else:
            t.fill_(torch.iinfo(t.dtype).min)


def compare_outputs(name: str, got: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> CompareResult:
    """Compare ``got`` with ``want`` in float64; NaN or Inf anywhere in ``got`` fails."""
    import torch

    if tuple(got.shape) != tuple(want.shape):
        return CompareResult(name, False, math.inf, math.inf, (), math.nan, math.nan, 0,
                             f"{name}: shape {tuple(got.shape)} but the reference has {tuple(want.shape)}")
    g = got.detach().to(torch.float64)
    w = want.detach().to(device=g.device, dtype=torch.float64)
    nonfinite = ~torch.isfinite(g)
    n_bad = int(nonfinite.sum())
    diff = (g - w).abs()
    diff = torch.where(nonfinite, torch.full_like(diff, math.inf), diff)
    max_abs = float(diff.max()) if diff.numel() else 0.0  # the largest error, whatever the bound
    # the element nearest to (or furthest over) its own bound; with rel_elem 0 that is the largest error
    excess = diff - tol.rel_elem * w.abs() if tol.rel_elem else diff
    flat = int(excess.argmax()) if diff.numel() else 0
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(g.shape))) if g.numel() else ()
    worst_excess = float(excess.reshape(-1)[flat]) if diff.numel() else 0.0  # NaN (inf - inf) fails below
    denom = float(torch.linalg.vector_norm(w)) or 1.0
    rel = math.inf if n_bad else float(torch.linalg.vector_norm(g - w)) / denom
    ok = n_bad == 0 and worst_excess <= tol.max_abs and rel <= tol.rel_l2
    got_v = float(g.reshape(-1)[flat]) if g.numel() else math.nan
    want_v = float(w.reshape(-1)[flat]) if w.numel() else math.nan
    if n_bad:
        msg = (f"{name}: {n_bad} of {g.numel()} elements are NaN/Inf (unwritten or overflowed), "
               f"first at index {idx}")
    elif tol.rel_elem:
        msg = (f"{name}: max abs error {max_abs:.3g}; nearest its bound: error {float(diff.reshape(-1)[flat]):.3g} "
               f"at index {idx} (got {got_v:.5g}, want {want_v:.5g}), rel L2 error {rel:.3g}; limits "
               f"|error| <= {tol.max_abs:g} + {tol.rel_elem:g} * |want|, rel_l2 {tol.rel_l2:g}")
    else:
        msg = (f"{name}: max abs error {max_abs:.3g} at index {idx} (got {got_v:.5g}, want {want_v:.5g}), "
               f"rel L2 error {rel:.3g}; limits max_abs {tol.max_abs:g}, rel_l2 {tol.rel_l2:g}")
    return CompareResult(name, ok, max_abs, rel, idx, got_v, want_v, n_bad, msg)
