"""LEARN for a derived opportunity: once a version tests one, it becomes a knowledge entry.

The profiler derives opportunities from the counters when fewer than three entries apply
(:mod:`pytest_kforge.profile.derive`); they are marked as not in the knowledge base.  When the
designer applies one and the version is measured, :func:`learn_derived` writes it as a shared
entry whose trigger is the rule's condition and whose local evidence is the measured trials:

* kept -> an optimisation, est. gain = the best measured gain on a trial where the condition held;
* slower beyond twice the spread (at least 1%) on every trial where the condition held -> an anti-pattern;
* anything else (within noise, mixed) -> an optimisation with est. gain 0 and a pitfall saying so,
  so the next profile shows it as tested rather than deriving it again.

The entry then replaces the derived opportunity in later profiles (the report skips derived names
the base has), and later versions update it through the ordinary LEARN rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .triggers import parse_trigger

__all__ = ["learn_derived", "verdict"]


def _fired(condition: str, metrics: Mapping[str, Mapping[str, float]], trials: Sequence[str]) -> list[str]:
    trig = parse_trigger(condition)
    return [t for t in trials if metrics.get(t) and trig.holds(metrics[t])]


def verdict(per: Mapping[str, Mapping[str, float]], fired: Sequence[str], *, kept: bool) -> tuple[str, float, str]:
    """``(kind, est_gain, why)`` for a tested derived opportunity by the rules of the module docstring."""
    where = list(fired) or list(per)
    gains = [float(per[t]["gain_pct"]) for t in where]
    if kept:
        return "optimization", round(max(max(gains), 0.0), 1), "kept"
    if all(float(per[t]["gain_pct"]) < -2 * max(float(per[t].get("noise_pct", 0.0)), 1.0) for t in where):
        return "anti-pattern", 0.0, "slower beyond twice the spread on every trial where its condition held"
    return "optimization", 0.0, "no gain beyond noise where its condition held"


def learn_derived(kb: Any, name: str, *, kernel: str, parent: str, new: str, language: str,
                  per: Mapping[str, Mapping[str, float]], metrics: Mapping[str, Mapping[str, float]],
                  changes: Sequence[str], kept: bool, gpu: str = "H200") -> str:
    """Write derived opportunity ``name`` (tested by ``new``, a child of ``parent``) as an entry; one line
    for the LEARN log.  ``per`` is the decision's per-trial ``{gain_pct, noise_pct, parent_us, new_us}``,
    ``metrics`` the parent's profile metrics per trial (where the opportunity was derived)."""
    from pytest_kforge.profile.derive import spec_for

    spec = spec_for(name)
    if spec is None:
        return f"{name} is neither a catalog entry nor a derived opportunity: nothing to update"
    if any(getattr(e, "name", None) == name for e in kb.entries()):
        return f"{name} is already an entry: the ordinary LEARN rules update it"
    fired = _fired(spec.condition, metrics, list(per))
    kind, gain, why = verdict(per, fired, kept=kept)
    rows = [(f"{kernel} {t}, {gpu}" + ("" if t in fired else " (condition not met)"),
             f"{per[t]['parent_us']:.1f} us ({parent})", f"{per[t]['new_us']:.1f} us ({new})",
             f"{-float(per[t]['gain_pct']):+.1f}%") for t in per]
    what = "; ".join(changes) or "no change listed"
    seen = "; ".join(f"{t}: {parse_trigger(spec.condition).describe(metrics[t])}" for t in fired) or "not measured"
    pitfalls = [f"derived by the profiler from the counters of {parent} ({seen}) and tested once, by {new}: {why}"]
    try:
        kb.add_entry(name, kind=kind, scope="shared", title=spec.title,
                     contexts=[f"{kernel}: first tested by {new} ({language}) from {parent}",
                               "any kernel whose profile meets the condition below"],
                     triggers=[spec.condition], est_gain=gain, mechanism=spec.mechanism,
                     affected_metrics=list(spec.affected),
                     implementation=f"# what {new} changed (the designer's summary)\n"
                                    + "\n".join(f"# - {c}" for c in changes or ["no change listed"]),
                     generalization="Counter-derived and measured on one kernel and GPU: re-measure before "
                                    "relying on the estimate elsewhere.", pitfalls=pitfalls,
                     interactions=["shares idle cycles with the other tensor-pipe and occupancy opportunities"
                                   if "tensor_idle_pct" in spec.condition else "none measured yet"],
                     applies_to=[kernel], evidence=rows, source="local")
    except Exception as exc:  # noqa: BLE001 - learning must not lose the run
        return f"failed add_entry({name}): {exc}"
    return f"add_entry({name}): derived opportunity tested by {new} ({what}) -> {kind}, {why}"
