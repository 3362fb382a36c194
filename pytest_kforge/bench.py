"""One trial benchmark end to end, and feeding its device times into pytest-benchmark.

:func:`run_trial` builds (or reuses) the trial's inputs, retries with the spec's ``shrink_param``
halved when they do not fit in GPU memory (recorded in the result's ``note``), checks the call
contract once, times it (:mod:`pytest_kforge.timing`), rejects side-stream work (the timing
check, then on CUDA one profiled launch: the stream audit) and times below the roofline floor, re-checks correctness on fresh inputs with the same output buffers, and
returns the result row of the results JSON.

:func:`feed_benchmark` hands the per-round device times to the ``benchmark`` fixture through a
clock that advances by exactly one measured device time per round, so ``--benchmark-autosave``,
``--benchmark-compare`` and ``--benchmark-compare-fail`` work on kernel time.
"""

from __future__ import annotations

import dataclasses
import statistics

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .correctness import ref_dtype_for, run_once
from .gpushare import gpu_section
from .spec import inputs_to
from .timing import (TimingResult, back_to_back, floor_problem, make_clock, side_stream_problem, stream_audit,
                     time_launch)

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version
    from .session import KforgeSession
    from .spec import TrialConfig

__all__ = ["run_trial", "feed_benchmark", "machine_info_update", "RECHECK_SEED_OFFSET", "EXTRA_INFO_KEYS"]

RECHECK_SEED_OFFSET = 7919
#: the fields of a trial row that pytest-benchmark stores as ``extra_info`` (one-process and xdist runs)
EXTRA_INFO_KEYS = ("tflops", "gbps", "pct_floor", "floor_us", "median_us", "spread_pct", "host_us", "b2b_us", "params", "note",
                   "clock", "sm_clock_mhz", "clock_events", "clock_retaken", "clock_guard", "clock_note",
                   "sm_clock_witness", "error")


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(exc, oom)


def _prepare(version: Version, trial: TrialConfig, ks: KforgeSession,
             host: HostInputs | None = None) -> tuple[TrialConfig, dict, dict, list[str]]:
    """Inputs, outputs and contract problems of one call, shrinking on out-of-memory."""
    spec = version.spec
    current = trial
    while True:
        try:
            made = host.for_params(ks.trial_in_use(current).params) if host is not None else None
            used, inputs = ks.trial_inputs(current, made.trial if made is not None else None)
            current = used  # a shrink remembered from an earlier version
            outputs = spec.alloc_outputs(used.params, device=ks.device)
            problems = run_once(version, inputs, outputs)
            if used.id != trial.id:
                ks.remember_shrunk(trial, used, inputs)
            return used, inputs, outputs, problems
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
            if not _is_oom(exc) or not spec.shrink_param:
                raise
            import torch

            key = spec.shrink_param
            ks.drop_inputs(current)
            ks.drop_inputs(trial)
            torch.cuda.empty_cache()
            old = int(current.params[key])
            if old <= 1:
                raise
            original = int(trial.params[key])
            note = f"{key} halved from {original} to {old // 2}: out of GPU memory"
            current = current.with_params(note=note, **{key: old // 2})


def recheck_seed(ks: KforgeSession) -> int:
    """The seed of the re-check's fresh inputs (drawn on the host before the GPU section, or inside it)."""
    return ks.seed + RECHECK_SEED_OFFSET


def _recheck(version: Version, used: TrialConfig, inputs: dict[str, Any], outputs: Mapping[str, Any],
             ks: KforgeSession, host: HostInputs | None = None) -> str | None:
    """Correctness after timing, on new values written *in place* into the timed input buffers.

    Two rounds, same pointers, same shapes, same output buffers: (1) in each floating-point input
    only one randomly chosen slice along the first dimension replaced by new values (one row, one
    sequence's queries), the rest kept; (2) every input replaced by new random values.  A result
    cached by a sampled fingerprint of the inputs fails (1) whenever the fingerprint misses the
    changed slice (so (1) must come first, while the cache still holds the timed inputs); one
    cached by pointer or shape fails (2).  The original values are restored
    afterwards (the inputs are shared by every version of the run).
    """
    import torch

    spec = version.spec
    seed = recheck_seed(ks)
    made = host.for_params(used.params) if host is not None else None
    fresh = inputs_to(made.fresh, ks.device) if made is not None else spec.make_inputs(
        used.params, seed=seed, device=ks.device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for mode in ("one random slice of new values", "new values"):
        clones: dict[str, Any] = {}  # overwritten in place: their old contents
        replaced: dict[str, Any] = {}  # scalars / changed shapes: the old objects
        for name, new in fresh.items():
            old = inputs.get(name)
            if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor) and old.shape == new.shape:
                if mode == "new values":
                    clones[name] = old.clone()
                    old.copy_(new)
                elif old.is_floating_point() and old.dim() > 0 and old.shape[0] > 0:
                    clones[name] = old.clone()
                    i = int(torch.randint(old.shape[0], (1,), generator=gen))
                    old[i].copy_(new[i])
            elif mode == "new values":
                replaced[name] = old
                inputs[name] = new
        try:
            problems = run_once(version, inputs, outputs)
            bad = [] if problems else [r.message for r in spec.compare(
                outputs, spec.reference(inputs, dtype=ref_dtype_for(version, used.params))) if not r.ok]
        finally:
            for name, old_values in clones.items():
                inputs[name].copy_(old_values)
            inputs.update(replaced)
        where = f"after timing, with {mode} written into the timed input buffers (seed {seed})"
        if problems:
            return f"{where}: " + "; ".join(problems)
        if bad:
            return (f"{where}: " + "; ".join(bad) + " (a result computed earlier was returned: "
                    "the timed rounds did not do the work)")
    return None


def run_trial(version: Version, trial: TrialConfig, ks: KforgeSession) -> tuple[dict[str, Any], TimingResult | None]:
    """Time ``version`` on ``trial``; returns the results-JSON row (``error`` set when rejected).

    On a GPU shared by several xdist workers all of it (inputs, warm-up, timing, stream audit,
    re-check) is one exclusive GPU section (:func:`~pytest_kforge.gpushare.gpu_section`), except the
    random values of the trial's inputs (when this process has not built them yet) and of the re-check's
    fresh inputs, which are made on the host before it (:class:`HostInputs`).
    """
    used = ks.trial_in_use(trial)
    host = HostInputs.make(version.spec, used, ks)
    with gpu_section(version, used.params):
        return _run_trial(version, trial, ks, host)


@dataclasses.dataclass
class HostInputs:
    """A trial's inputs made on the host outside the GPU lock: ``trial`` (None when this process already
    holds them on the device) and the re-check's ``fresh`` ones, for ``params``; a shrink for memory inside
    the section changes the params, and then the section makes its own."""

    params: dict[str, Any]
    trial: dict[str, Any] | None
    fresh: dict[str, Any]

    @classmethod
    def make(cls, spec: Any, used: TrialConfig, ks: KforgeSession) -> HostInputs:
        return cls(dict(used.params),
                   None if ks.has_trial_inputs(used) else ks.make_trial_inputs(used, "cpu"),
                   spec.make_inputs(used.params, seed=recheck_seed(ks), device="cpu"))

    def for_params(self, params: Mapping[str, Any]) -> HostInputs | None:
        return self if dict(params) == self.params else None


def _run_trial(version: Version, trial: TrialConfig, ks: KforgeSession,
               host: HostInputs | None = None) -> tuple[dict[str, Any], TimingResult | None]:
    spec = version.spec
    used, inputs, outputs, problems = _prepare(version, trial, ks, host)
    row: dict[str, Any] = {
        "version": version.name, "language": version.language, "parent": version.parent,
        "trial": trial.name, "id": used.id, "params": dict(used.params), "note": used.note,
        "correct": False, "median_us": None, "min_us": None, "iqr_us": None, "spread_pct": None,
        "rounds": 0, "tflops": None, "gbps": None, "pct_floor": None, "floor_us": None, "error": None,
    }
    floor_s = spec.floor_s(used.params, ks.roofline)
    row["floor_us"] = floor_s * 1e6
    if problems:
        row["error"] = "; ".join(problems)
        return row, None
    launch = version.bind(inputs, outputs)  # the public call, what users run

    clock = make_clock(ks.device, ks.clock_guard_pct)
    res = time_launch(launch, clock=clock, rounds=ks.rounds, warmup=ks.warmup)
    med = res.median_s
    row.update(median_us=med * 1e6, min_us=res.min_s * 1e6, iqr_us=res.iqr_s * 1e6,
               spread_pct=res.spread_pct, rounds=res.rounds, clock=res.clock, flush=res.flush,
               host_us=statistics.median(res.host_s) * 1e6 if res.host_s else None,
               samples_us=[x * 1e6 for x in res.samples_s],
               tflops=spec.flops(used.params) / med / 1e12, gbps=spec.min_bytes(used.params) / med / 1e9,
               pct_floor=100.0 * floor_s / med)
    row.update(res.clock_fields())
    # the same public call back to back (no spin): above median_us when the call's host side is the bottleneck
    row["b2b_us"] = statistics.median(back_to_back(launch, clock=clock)) * 1e6
    audit_notes: list[str] = []
    audit_state = ["not run (cpu)" if not str(ks.device).startswith("cuda") else "not run (rejected before it)"]

    def audit() -> str | None:
        if not str(ks.device).startswith("cuda"):
            return None
        problem = stream_audit(launch, notes=audit_notes)
        audit_state[0] = "; ".join(audit_notes) or ("failed" if problem else "ok")
        return problem

    error = (side_stream_problem(res) or audit() or floor_problem(med, floor_s)
             or _recheck(version, used, inputs, outputs, ks, host))
    row["stream_audit"] = audit_state[0]  # "ok", "failed", why it could not run, or why it was not run
    if error is None:
        row["sm_clock_witness"] = _witness(launch, ks, med * 1e6)
    row["correct"] = error is None or not error.startswith("after timing")
    row["error"] = error
    return row, res


def _witness(launch: Any, ks: KforgeSession, median_us: float) -> dict[str, Any] | None:
    """The SM clock counted inside a burst of the trial (:mod:`~pytest_kforge.clockwitness`), or None (off, cpu).

    Taken after the timed rounds, in the same exclusive GPU section; a failure of the witness
    itself (say, a torch without ``torch.cuda._sleep``) is reported in the row, never fails the trial.
    """
    if not ks.clock_witness_ms or not str(ks.device).startswith("cuda"):
        return None
    from .clockwitness import summary, witness
    from .gpuclock import reader_for

    try:
        w = witness(launch, window_ms=ks.clock_witness_ms, reader=reader_for(ks.device))
    except Exception as exc:  # noqa: BLE001 - a measurement beside the figure, never its verdict
        return {"error": f"{type(exc).__name__}: {exc}"}
    return summary(w, median_us)


def feed_benchmark(benchmark: Any, samples_s: Sequence[float], extra_info: Mapping[str, Any],
                   group: str | None = None) -> None:
    """Record ``samples_s`` (device seconds per round) as the benchmark's rounds."""
    benchmark.extra_info.update(extra_info)
    if group:
        benchmark.group = group
    if getattr(benchmark, "disabled", False) or not samples_s:
        return
    if not hasattr(benchmark, "_timer"):  # pragma: no cover - guards a future pytest-benchmark
        raise RuntimeError("this pytest-benchmark has no fixture._timer; pin pytest-benchmark>=5,<6")
    pending = iter(samples_s)
    now = [0.0]

    def kforge_device_clock() -> float:
        return now[0]

    def advance_by_one_measured_round() -> None:
        now[0] += next(pending)

    # pytest-benchmark reads the fixture's timer in its runner: start, target(), end.  Our target
    # moves the clock forward by one measured device time, so end - start is exactly that time.
    benchmark._timer = kforge_device_clock
    benchmark.pedantic(advance_by_one_measured_round, rounds=len(samples_s), iterations=1, warmup_rounds=0)


def machine_info_update(machine_info: dict[str, Any]) -> None:
    """Add the GPU identity so pytest-benchmark warns when comparing runs from different GPUs."""
    from .gpuinfo import gpu_identity

    ident = gpu_identity()
    machine_info["gpu"] = ident["gpu"] or "none (cpu)"
    machine_info["kforge"] = {k: ident[k] for k in ("gpu", "capability", "driver", "cuda", "torch",
                                                    "cuda-tile", "nvidia-cutlass-dsl")}
