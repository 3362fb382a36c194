"""One trial benchmark end to end: the row of the results JSON (:class:`~pytest_kforge.results.TrialResult`).

:func:`run_trial` gets the trial's inputs from the session's :class:`~pytest_kforge.trialinputs.TrialInputs`
(built once, shrunk for memory there, the note saying so), which also checked the call contract once; it
times the public call (:mod:`pytest_kforge.timing`), rejects side-stream work (the timing check, then on CUDA
one profiled launch: the stream audit) and times below the roofline floor, re-checks correctness on fresh
inputs with the same output buffers, and returns the row.  Feeding the times to pytest-benchmark is
:mod:`pytest_kforge.benchadapter`'s.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .correctness import ref_dtype_for, run_once
from .gpushare import gpu_section
from .results import TrialResult
from .timing import TimingResult, back_to_back, floor_problem, make_clock, side_stream_problem, stream_audit, time_launch

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version
    from .session import KforgeSession
    from .spec import TrialConfig
    from .trialinputs import HostInputs, TrialInputs

__all__ = ["run_trial"]


def _recheck(version: Version, used: TrialConfig, inputs: dict[str, Any], outputs: Mapping[str, Any],
             source: TrialInputs, host: HostInputs | None = None) -> str | None:
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
    seed = source.recheck_seed
    fresh = source.fresh(used.params, host)
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


def run_trial(version: Version, trial: TrialConfig, ks: KforgeSession) -> tuple[TrialResult, TimingResult | None]:
    """Time ``version`` on ``trial``; returns the results-JSON row (``error`` set when rejected).

    On a GPU shared by several xdist workers all of it (inputs, warm-up, timing, stream audit,
    re-check) is one exclusive GPU section (:func:`~pytest_kforge.gpushare.gpu_section`), except the
    random values of the trial's inputs (when this process has not built them yet) and of the re-check's
    fresh inputs, which are drawn on the host before it (:meth:`TrialInputs.host_draw`).
    """
    source = ks.inputs
    host = source.host_draw(trial)
    with gpu_section(version, host.params):
        return _run_trial(version, trial, ks, source, host)


def _run_trial(version: Version, trial: TrialConfig, ks: KforgeSession, source: TrialInputs,
               host: HostInputs) -> tuple[TrialResult, TimingResult | None]:
    spec = version.spec
    prepared = source.prepare(version, trial, host)
    used, inputs, outputs = prepared.trial, prepared.inputs, prepared.outputs
    floor_s = spec.floor_s(used.params, ks.roofline)
    row = TrialResult(version=version.name, language=version.language, parent=version.parent, trial=trial.name,
                      id=used.id, params=dict(used.params), note=used.note, floor_us=floor_s * 1e6)
    if prepared.problems:
        row.error = "; ".join(prepared.problems)
        return row, None
    launch = version.bind(inputs, outputs)  # the public call, what users run

    clock = make_clock(ks.device, ks.clock_guard_pct)
    res = time_launch(launch, clock=clock, rounds=ks.rounds, warmup=ks.warmup)
    med = res.median_s
    row.median_us, row.min_us, row.iqr_us = med * 1e6, res.min_s * 1e6, res.iqr_s * 1e6
    row.spread_pct, row.rounds, row.clock, row.flush = res.spread_pct, res.rounds, res.clock, res.flush
    row.host_us = statistics.median(res.host_s) * 1e6 if res.host_s else None
    row.samples_us = [x * 1e6 for x in res.samples_s]
    row.tflops = spec.flops(used.params) / med / 1e12
    row.gbps = spec.min_bytes(used.params) / med / 1e9
    row.pct_floor = 100.0 * floor_s / med
    for key, value in res.clock_fields().items():
        setattr(row, key, value)
    # the same public call back to back (no spin): above median_us when the call's host side is the bottleneck
    b2b_host: list[float] = []
    row.b2b_us = statistics.median(back_to_back(launch, clock=clock, host_s=b2b_host)) * 1e6
    row.b2b_host_us = statistics.median(b2b_host) * 1e6 if b2b_host else None
    audit_notes: list[str] = []
    audit_state = ["not run (cpu)" if not str(ks.device).startswith("cuda") else "not run (rejected before it)"]

    def audit() -> str | None:
        if not str(ks.device).startswith("cuda"):
            return None
        problem = stream_audit(launch, notes=audit_notes)
        audit_state[0] = "; ".join(audit_notes) or ("failed" if problem else "ok")
        return problem

    error = (side_stream_problem(res) or audit() or floor_problem(med, floor_s)
             or _recheck(version, used, inputs, outputs, source, host))
    row.stream_audit = audit_state[0]  # "ok", "failed", why it could not run, or why it was not run
    if error is None:
        row.sm_clock_witness = _witness(launch, ks, med * 1e6)
    row.correct = error is None or not error.startswith("after timing")
    row.error = error
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
