"""Run-time guards around one call of an untrusted version (used by the harness's correctness calls).

* :func:`forbid_reference` -- while a non-torch version runs, the spec's ``reference`` and the
  ``run`` of every loaded torch-language version raise :class:`ReferenceCalled` ("kernel called
  the reference"), and a ``TorchDispatchMode`` rejects the aten ops of torch attention and
  torch math (``mm``, ``bmm``, ``addmm``, ``_softmax``, ``logsumexp``, ``_scaled_dot_product_*``
  ...), which also catches aliases such as ``from torch import matmul as mm``.  A violation is
  recorded even if the kernel swallows the exception, and re-raised when the block exits.
* :func:`measure_side_stream_work` -- the side-stream check.  Method: two untimed calls first
  (lazy module loading, allocator growth and stream creation would otherwise inflate the first
  sample); then per repeat: synchronise the whole device; enqueue a spin ("hold") on the current
  stream sized to cover the host's launch time, so event A below is stamped after the host has
  issued the call (otherwise, on an idle device, the events measure host launch time, and a slow
  first launch once hid a 0.5 ms side-stream cheat); record A; call; record B right away (no
  synchronise); wait for B only (host t1); synchronise the whole device (host t2).  ``event = B - A``
  is the current stream's work and ``tail = t2 - t1`` is device work still running on *other*
  streams after the current stream finished.  Flagged when the *median* tail exceeds both
  ``abs_tol_s`` and ``rel_tol`` x the median event time (each statistic over the same repeats,
  so one slow repeat can neither hide nor fake a cheat).  Side work that does not wait for the
  current stream can run concurrently with the hold and finish before A; the harness's timer has
  the same blind spot, see :mod:`pytest_kforge.timing`.  The device operations go through a small
  :class:`DeviceTimeline` so tests can drive it with a fake clock.
* :class:`InputSnapshot` -- bitwise snapshot of the inputs (and their shape/stride/storage):
  any change after the call is a mutation.
* :func:`check_returned` -- the returned tensors must be the very output tensors passed in
  (plain ``torch.Tensor``, same storage, offset, shape, strides, dtype), not lazy objects,
  subclasses, copies or views of inputs.
* :func:`floor_check` -- a median faster than ``margin`` x the physical floor is a measurement
  error, never a win.
* :func:`perturb_inputs_` / :func:`recheck_in_place` -- the post-benchmark re-check on the timed
  buffers themselves (refilled in place, then one slice of each floating input re-randomised),
  which defeats result caches keyed by pointer, shape or a sampled fingerprint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from ..errors import KforgeError

__all__ = ["ReferenceCalled", "RefGuard", "forbid_reference", "FORBIDDEN_ATEN_OPS", "DeviceTimeline",
           "HoldingTimeline", "TorchTimeline", "StreamReport", "measure_side_stream_work", "InputSnapshot", "check_returned",
           "floor_check", "perturb_inputs_", "recheck_in_place"]

#: aten overload packets a DSL version may not run during a guarded call (attention and dense math)
FORBIDDEN_ATEN_OPS = frozenset({
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "_softmax", "_log_softmax", "softmax", "log_softmax",
    "logsumexp", "einsum", "linear", "_scaled_mm", "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention_math", "_flash_attention_forward", "_efficient_attention_forward",
    "_scaled_dot_product_fused_attention_overrideable",
})


class ReferenceCalled(KforgeError, RuntimeError):
    """A version under guard called the reference, another torch version, or torch attention/math."""


@dataclasses.dataclass
class RefGuard:
    """What :func:`forbid_reference` saw; ``violations`` lists each forbidden call once."""

    version: str = "kernel"
    violations: list[str] = dataclasses.field(default_factory=list)

    def hit(self, what: str) -> ReferenceCalled:
        if what not in self.violations:
            self.violations.append(what)
        return ReferenceCalled(f"kernel called the reference: {self.version} ran {what} during its guarded call; "
                               f"a DSL version must compute the result with its own kernel")


def _make_dispatch_mode(guard: RefGuard) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class _NoTorchMath(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
            if name in FORBIDDEN_ATEN_OPS:
                raise guard.hit(f"torch op aten.{name}")
            return func(*args, **(kwargs or {}))

    return _NoTorchMath()


@contextlib.contextmanager
def forbid_reference(spec: Any = None, *, version: str = "kernel", torch_ops: bool = True,
                     extra: Sequence[tuple[Any, str]] = ()) -> Iterator[RefGuard]:
    """Guard a non-torch version's call (see the module docstring); ``extra`` = (owner, attribute) pairs to poison."""
    guard = RefGuard(version)
    targets: list[tuple[Any, str, str]] = []
    if spec is not None:
        targets.append((spec, "reference", f"{type(spec).__name__}.reference"))
        targets.append((type(spec), "reference", f"{type(spec).__name__}.reference"))
    for modname, mod in list(sys.modules.items()):
        if modname.startswith("kforge_kernels.") and getattr(mod, "LANGUAGE", None) == "torch" and hasattr(mod, "run"):
            targets.append((mod, "run", f"{modname}.run (a torch version)"))
    targets += [(owner, attr, f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}") for owner, attr in extra]
    saved: list[tuple[Any, str, bool, Any]] = []

    def raiser(label: str) -> Callable[..., Any]:
        def _forbidden(*_a: Any, **_k: Any) -> Any:
            raise guard.hit(label)
        return _forbidden

    try:
        for owner, attr, label in targets:
            had = attr in vars(owner) if hasattr(owner, "__dict__") else False
            saved.append((owner, attr, had, vars(owner).get(attr) if had else None))
            setattr(owner, attr, raiser(label))
        with (_make_dispatch_mode(guard) if torch_ops else contextlib.nullcontext()):
            yield guard
    finally:
        for owner, attr, had, old in reversed(saved):
            if had:
                setattr(owner, attr, old)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, attr)
    if guard.violations:  # also when the kernel caught the exception and carried on
        raise ReferenceCalled(f"kernel called the reference: {version} ran {', '.join(guard.violations)} "
                              f"during its guarded call; a DSL version must compute the result with its own kernel")


# ---- side streams ---------------------------------------------------------------------------
class DeviceTimeline(Protocol):
    def sync_all(self) -> None: ...
    def record(self) -> Any: ...
    def wait(self, mark: Any) -> None: ...
    def elapsed_s(self, start: Any, end: Any) -> float: ...


class HoldingTimeline(DeviceTimeline, Protocol):
    def hold(self, seconds: float) -> None: ...


#: cycles per second assumed to size the spin (H200 SM clock ~1.98 GHz; a lower clock only spins longer)
_SPIN_HZ = 2.0e9


class TorchTimeline:
    """The real device: CUDA events on torch's current stream, ``torch.cuda.synchronize`` and a spin kernel."""

    def __init__(self, device: Any = None) -> None:
        import torch

        self.torch, self.device = torch, device

    def sync_all(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def hold(self, seconds: float) -> None:
        """Keep the current stream busy for about ``seconds`` (enqueued, not waited for)."""
        self.torch.cuda._sleep(int(seconds * _SPIN_HZ))

    def record(self) -> Any:
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def elapsed_s(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1e3


@dataclasses.dataclass
class StreamReport:
    """Median timings of the side-stream check over its repeats; ``message`` empty when ok."""

    event_s: float
    tail_s: float
    wall_s: float
    ok: bool
    message: str


def measure_side_stream_work(call: Callable[[], Any], *, timeline: DeviceTimeline | None = None,
                             clock: Callable[[], float] = time.perf_counter, repeats: int = 5,
                             abs_tol_s: float = 50e-6, rel_tol: float = 0.25, warmup: int = 2,
                             max_hold_s: float = 10e-3) -> StreamReport:
    """Call ``call`` ``warmup`` + ``repeats`` times and report device work left on non-current streams.

    ``abs_tol_s`` absorbs host-synchronise jitter (tens of microseconds); ``rel_tol`` lets
    small overlapping side work through when the current stream does most of the work.
    """
    tl = timeline or TorchTimeline()
    hold = getattr(tl, "hold", None)
    host_s = 0.0
    for _ in range(max(0, warmup)):  # the last warm call's host time sizes the first hold
        tl.sync_all()
        h0 = clock()
        call()
        host_s = clock() - h0
    tails: list[float] = []
    events: list[float] = []
    walls: list[float] = []
    for _ in range(max(1, repeats)):
        tl.sync_all()
        t0 = clock()
        if hold is not None:  # the device waits for the host: A is stamped after the call is issued
            hold(min(max_hold_s, max(100e-6, 2.0 * host_s)))
        a = tl.record()
        h0 = clock()
        call()
        host_s = clock() - h0
        b = tl.record()
        tl.wait(b)
        t1 = clock()
        tl.sync_all()
        t2 = clock()
        tails.append(t2 - t1)
        events.append(max(tl.elapsed_s(a, b), 0.0))
        walls.append(t2 - t0)
    tail, event, wall = (statistics.median(v) for v in (tails, events, walls))
    bad = tail > abs_tol_s and tail > rel_tol * event
    msg = (f"device work kept running {tail * 1e6:.1f} us after the current stream finished (its timed work took "
           f"{event * 1e6:.1f} us; medians of {len(tails)} calls): the kernel launched work on a side stream, "
           f"which the timer misses; launch on torch.cuda.current_stream() or join the side stream back") if bad else ""
    return StreamReport(event, tail, wall, not bad, msg)


# ---- inputs and outputs -------------------------------------------------------------------
_INT_VIEW = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _bits(t: Any) -> Any:
    import torch

    if t.dtype.is_complex:
        t = torch.view_as_real(t)
    size = t.element_size()
    return t.detach().view(getattr(torch, _INT_VIEW[size])) if size in _INT_VIEW else t.detach()


def _meta(t: Any) -> tuple[Any, ...]:
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.data_ptr(), t.dtype, str(t.device))


@dataclasses.dataclass
class InputSnapshot:
    """Bitwise copies of the tensor inputs plus their layout; :meth:`changed` names what moved."""

    bits: dict[str, Any]
    meta: dict[str, tuple[Any, ...]]
    scalars: dict[str, Any]

    @classmethod
    def take(cls, inputs: Mapping[str, Any]) -> InputSnapshot:
        import torch

        bits, meta, scalars = {}, {}, {}
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                bits[k], meta[k] = _bits(v).clone(), _meta(v)
            elif isinstance(v, (int, float, str, bool, tuple)) or v is None:
                scalars[k] = v
        return cls(bits, meta, scalars)

    def changed(self, inputs: Mapping[str, Any]) -> list[str]:
        """One sentence per input the call modified (values, layout or identity)."""
        import torch

        out = []
        for k, snap in self.bits.items():
            now = inputs.get(k)
            if not isinstance(now, torch.Tensor) or _meta(now) != self.meta[k]:
                out.append(f"input {k!r} was replaced or re-laid-out (shape, strides or storage changed); inputs are read-only")
            elif not torch.equal(_bits(now), snap):
                n = int((_bits(now) != snap).sum())
                out.append(f"input {k!r} was modified in place ({n} of {snap.numel()} elements changed); inputs are read-only")
        for k, v in self.scalars.items():
            if inputs.get(k) is not v and inputs.get(k) != v:
                out.append(f"input {k!r} changed from {v!r} to {inputs.get(k)!r}; inputs are read-only")
        return out


def _overlaps(a: Any, b: Any) -> bool:
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.device != sb.device or sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def check_returned(returned: Any, outputs: Mapping[str, Any], inputs: Mapping[str, Any] = {},  # noqa: B006
                   output_names: Sequence[str] | None = None, version: str = "the version") -> list[str]:
    """Problems with what a version returned (empty: it returned exactly the given outputs)."""
    import torch

    names = list(output_names or outputs.keys())
    problems: list[str] = []
    if not isinstance(returned, (tuple, list)) or len(returned) != len(names):
        got = type(returned).__name__ + (f" of {len(returned)}" if isinstance(returned, (tuple, list)) else "")
        return [f"{version} returned {got} but must return a tuple of its {len(names)} output tensors "
                f"({', '.join(names)}), the very tensors passed in"]
    for name, got in zip(names, returned):
        want = outputs[name]
        if type(got) is not torch.Tensor:
            problems.append(f"{version} returned a {type(got).__module__}.{type(got).__qualname__} for {name!r}, not "
                            f"the plain torch.Tensor passed in (lazy, deferred or substituted results are refused)")
        elif got is not want and _meta(got) != _meta(want):
            problems.append(f"{version} returned a tensor for {name!r} that is not the output buffer passed in "
                            f"(different storage, offset, shape or strides); write into `{name}` and return it")
    for oname, o in outputs.items():
        for iname, i in inputs.items():
            if isinstance(o, torch.Tensor) and isinstance(i, torch.Tensor) and _overlaps(o, i):
                problems.append(f"output {oname!r} shares memory with input {iname!r}; outputs must be separate buffers")
    return problems


def floor_check(median_s: float, floor_s: float, margin: float = 0.9) -> str | None:
    """None when ``median_s`` is physically possible, else why it is a measurement error (one sentence)."""
    if not (isinstance(median_s, (int, float)) and math.isfinite(median_s)) or median_s <= 0:
        return f"measured time {median_s!r} s is not a positive finite number: a measurement error, not a result"
    if not (isinstance(floor_s, (int, float)) and math.isfinite(floor_s)) or floor_s < 0:
        raise ValueError(f"floor_s must be a finite number of seconds >= 0, got {floor_s!r}")
    if median_s < margin * floor_s:
        return (f"measured {median_s * 1e6:.3g} us is faster than {margin:g} x the physical floor "
                f"{floor_s * 1e6:.3g} us (bytes / peak bandwidth, FLOPs / peak rate): rejected as a measurement "
                f"error (work escaped the timer, or the result was cached), never reported as a win")
    return None


def perturb_inputs_(inputs: Mapping[str, Any], *, seed: int, names: Sequence[str] | None = None) -> list[str]:
    """Re-randomise one dim-0 slice of each floating input in place; returns ``name[index]`` per change."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    changed = []
    for k, v in inputs.items():
        if names is not None and k not in names:
            continue
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dim() > 0 and v.shape[0] > 0:
            i = int(torch.randint(v.shape[0], (1,), generator=gen))
            scale = float(v.float().std()) if v.numel() > 1 else 1.0
            fresh = torch.randn(v[i].shape, generator=gen) * (scale if math.isfinite(scale) and scale > 0 else 1.0)
            v[i].copy_(fresh.to(device=v.device, dtype=v.dtype))
            changed.append(f"{k}[{i}]")
    return changed


def recheck_in_place(call: Callable[[], Any], spec: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any], *,
                     fresh: Mapping[str, Any], seed: int, ref_dtype: Any = None) -> str | None:
    """The post-benchmark re-check on the very buffers that were timed; None when it passes.

    Result caches keyed by pointer or shape survive fresh *allocations* (same shape, and the
    allocator hands back the same pointers); caches keyed by a sampled fingerprint survive any
    input whose sampled elements did not change.  So: (1) refill the timed input buffers in
    place with ``fresh`` data (same pointers, shapes, dtypes), (2) then re-randomise one dim-0
    slice of every floating input (:func:`perturb_inputs_`); after each step poison the outputs,
    ``call()`` and compare with the reference.  The inputs are restored afterwards (the harness
    shares them between versions).
    """
    import torch

    from ..spec import poison_

    saved = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    try:
        for step in ("refilled in place with fresh data", "perturbed in place"):
            if step.startswith("refilled"):
                for k, v in fresh.items():
                    cur = inputs.get(k)
                    if isinstance(cur, torch.Tensor) and isinstance(v, torch.Tensor) and cur.shape == v.shape:
                        cur.copy_(v)
                where = ""
            else:
                where = " (" + ", ".join(perturb_inputs_(inputs, seed=seed)) + ")"
            poison_(outputs)
            call()
            if str(next(iter(outputs.values())).device).startswith("cuda"):
                torch.cuda.synchronize()
            ref = spec.reference(inputs, dtype=ref_dtype)
            bad = [r.message for r in spec.compare(outputs, ref) if not r.ok]
            if bad:
                return (f"after timing, with the timed input buffers {step}{where}: " + "; ".join(bad)
                        + " (the output did not follow its inputs: a result cache keyed by pointer, shape or fingerprint)")
        return None
    finally:
        for k, v in saved.items():
            inputs[k].copy_(v)
