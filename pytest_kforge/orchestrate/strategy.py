"""STRATEGIZE helpers: picking catalog entries, the tuning-space policy, and the designer's task.

Tuning-space policy (seed workflow), applied per parent version by :func:`tuning_phase`:

1. ``manual``: the first child of a version applies the catalog's promising change by hand;
2. ``tile-configs``: the next two children try a few tile configs to see how time moves;
3. ``coarse-autotune``: only when the picture is still unclear (no child kept yet), a coarse
   sweep over hand-picked values (pruned by domain knowledge: one knob at a time, values from the
   designer's short lists), time-boxed by ``--autotune-budget`` (default 1 h per version);
4. ``stop``: when the budget is spent, or the coarse sweep (``COARSE_LIMIT`` configs) shows no
   significant gain over the parent.  The cautionary example from the workflow: a version tuned
   over 10,000 configurations showed no significant gain over its parent -- design beats
   autotuning, so the loop stops tuning and reports it instead of sweeping further.

A finer autotune is only for a version with real promise: a kept child becomes the new parent
and the policy restarts from ``manual`` for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..profile.derive import is_derived
from . import compat
from .agents.base import clean

__all__ = ["COARSE_LIMIT", "NO_GAIN_PCT", "tuning_phase", "pick_entries", "refuted_entries", "declined_items",
           "build_task", "render_plan", "LANGUAGE_LIMITS"]

COARSE_LIMIT = 6
#: a tested entry whose every trial moved by less than this (faster) did not pay: the harness's run-to-run spread is
#: ~1-2% on these kernels, so a smaller gain is noise
NO_GAIN_PCT = 1.0

LANGUAGE_LIMITS = {
    "cutile-dsl": "tile-level only (tile shapes, split count, num_ctas/occupancy and latency hints, fusion); no "
                  "explicit warp roles, named barriers or register reallocation; tile dims powers of two",
    "cute-dsl": "explicit control available (warp specialisation, wgmma/TMA staging with mbarriers, setmaxnreg, "
                "named barriers); keep sm_90a-only paths behind supports() and the sm80 fallback working",
    "torch": "reference language: correctness only, not a speed target",
}


def tuning_phase(history: list[dict[str, Any]], parent: str, budget_s: float) -> tuple[str, str]:
    """(phase, why) for the next child of ``parent`` given this run's evaluated attempts."""
    attempts = [h for h in history if h.get("parent") == parent]
    spent = sum(float(h.get("verify_s", 0.0)) for h in attempts)
    if attempts and spent >= budget_s:
        return "stop", (f"the tuning budget for {parent} ({budget_s:g} s) is spent on {len(attempts)} configs "
                        f"without a kept version; design the next change instead of autotuning further")
    if len(attempts) >= COARSE_LIMIT and not any(h.get("kept") for h in attempts):
        return "stop", (f"the coarse sweep of {len(attempts)} configs from {parent} shows no significant gain; "
                        f"design beats autotuning (cf. the 10,000-config example with no gain over its parent)")
    if not attempts:
        return "manual", "first child: apply the catalog's promising change by hand"
    if len(attempts) < 3:
        return "tile-configs", f"{len(attempts)} config(s) tried from {parent}: try a few tile configs"
    return "coarse-autotune", (f"picture unclear after {len(attempts)} configs: coarse sweep over hand-picked "
                               f"values, time-boxed ({budget_s - spent:.0f} s left)")


def refuted_entries(kb: Any, kernel: str, parent: str, *, min_gain_pct: float = NO_GAIN_PCT,
                    this_run: Sequence[str] = ()) -> dict[str, str]:
    """``{entry: why}`` for the catalog entries already tested on ``kernel`` from ``parent`` without a gain.

    LEARN writes each tested version into its entries' local evidence (``| mla decode, GPU | 78.5 us (v59_cute) |
    78.2 us (v61_cute) | -0.4% |``); an entry whose rows from ``parent`` all moved by less than ``min_gain_pct``
    (faster) was refuted for that parent: planning it again from the same parent would repeat the experiment.
    A kept child is a new parent, so its own children may try the entry again.  Children made by this run
    (``this_run``) do not count: inside a run the tuning phases (:func:`tuning_phase`) decide whether an entry's
    knob is tried at another value.
    """
    out: dict[str, str] = {}
    for entry in kb.entries():
        rows = []
        for r in entry.evidence_rows("local") if hasattr(entry, "evidence_rows") else ():
            change = _pct(r.change)
            child = r.after.rsplit("(", 1)[-1].rstrip(")")
            if r.config.startswith(f"{kernel} ") and f"({parent})" in r.before and change is not None \
                    and child not in this_run:
                rows.append((child, change))
        if rows and all(c > -min_gain_pct for _, c in rows):
            children = sorted({child for child, _ in rows})
            moved = " / ".join(f"{c:+.1f}%" for _, c in rows)
            out[str(entry.name)] = (f"tested from {parent} by {', '.join(children)}: {moved} (no trial faster by "
                                    f"{min_gain_pct:g}% or more)")
    return out


#: a devlog entry's heading as LEARN writes it: ``### v66_cute (cute-dsl, from v59_cute) -- <date>, ...``
_ENTRY_RE = re.compile(r"^### (\S+) \([^,()]+, from (\S+)\)", re.M)
#: a designer's change declining a task item (agents/kernel-designer.md): ``<name> not applied: <why>``
_DECLINED_RE = re.compile(r"^\s*(?P<name>.+?) not applied: (?P<why>.+?)\s*$")


def declined_items(devlog_text: str, parent: str) -> dict[str, str]:
    """``{item: why}`` for the task items a designer declined in a child of ``parent`` (the devlog's entries).

    The designer names a planned item it did not apply as its own change, ``<name> not applied: <why>``
    (agents/kernel-designer.md), and LEARN writes the changes into the child's devlog entry.  Planning the item
    again from the same parent asks the designer a question it has answered (run 32 offered cut-dram-rereads and
    fold-the-combine from v59_cute three times, declined each time with the same reasons); a kept child is a new
    parent, whose profile may make the item worth it again.  The latest child's reason wins.
    """
    out: dict[str, str] = {}
    heads = list(_ENTRY_RE.finditer(devlog_text))
    for k, h in enumerate(heads):
        if h.group(2) != parent:
            continue
        body = devlog_text[h.end():heads[k + 1].start() if k + 1 < len(heads) else len(devlog_text)]
        line = next((x for x in body.splitlines() if x.startswith("**What changed:**")), "")
        for change in line.removeprefix("**What changed:**").split("; "):
            m = _DECLINED_RE.match(change)
            if m:
                out[m.group("name").strip("` ")] = f"declined from {parent} by {h.group(1)}'s designer: {m.group('why')}"
    return out


def _pct(text: str) -> float | None:
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None


def pick_entries(kb: Any, metrics: dict[str, dict[str, float]], profiles: dict[str, Any], *, kernel: str,
                 language: str, limit: int = 3, applied: Mapping[str, str] | None = None,
                 tags: Sequence[str] | None = None,
                 refuted: Mapping[str, str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(entries to apply, anti-patterns to avoid) from the catalog matches of every trial's metrics.

    ``applied`` (``{entry: why}``, :func:`pytest_kforge.profile.features.version_features`) names what the
    current version already does: those entries are never picked to apply again (the profile report
    leaves them out of its opportunities for the same reason).  ``refuted`` (:func:`refuted_entries`) names the
    ones already tested from this version without a gain, or declined by a designer (:func:`declined_items`): not
    picked either (matched by name or title).

    Picks are keyed by catalog entry name: the profiler's own opportunities are added only when
    they name (by name, title or entry path) no entry already picked, and one naming a catalog
    entry by path or name carries that entry's name, title and kind (an entry is never picked twice,
    once by title and once by name).  Ranked by estimated gain, best first.
    """
    best: dict[str, dict[str, Any]] = {}
    tags = tuple(tags or (kernel,))  # the kernel's name and its spec's tags (registry.kernel_tags)
    for trial, m in metrics.items():
        for match in kb.match(m, kernel_tags=tags, language=language):
            f = compat.match_fields(match)
            f["trial"] = trial
            if f["name"] not in best or f["est_gain_pct"] > best[f["name"]]["est_gain_pct"]:
                best[f["name"]] = f
    catalog = {str(getattr(e, "name", "")): e for e in kb.entries()}
    for trial, p in profiles.items():
        for o in p.get("opportunities", []):
            ref = "" if is_derived(str(o.get("entry") or "")) else str(o.get("entry") or "")  # not a file
            stem = Path(ref).stem if ref.endswith(".md") else ref
            key = next((k for k in (stem, o["name"]) if k in catalog), stem or o["name"])
            taken = any(x and x in (b["name"], b["title"]) for b in best.values() for x in (key, o["name"], ref))
            if taken or any(ref and b["path"].endswith(ref) for b in best.values()):
                continue
            f = compat.match_fields(catalog[key]) if key in catalog else {
                "name": key, "title": o["name"], "path": ref, "kind": "optimization", "languages": [], "config": {}}
            best[key] = {**f, "est_gain_pct": float(o.get("est_gain_pct") or 0.0),
                         "trigger": o.get("trigger", ""), "condition": "", "trial": trial}
    ranked = sorted(best.values(), key=lambda f: -f["est_gain_pct"])
    avoid = [f for f in ranked if "anti" in f["kind"].lower()]
    skip = {**(applied or {}), **(refuted or {})}
    apply = [f for f in ranked if "anti" not in f["kind"].lower() and f["name"] not in skip
             and str(f.get("title") or "") not in skip][:limit]
    return apply, avoid


def build_task(*, kernel: str, current: str, new_version: str, profiles: dict[str, Any],
               metrics: dict[str, dict[str, float]], planned: list[dict[str, Any]], selection: dict[str, Any],
               design_language: str, offline: bool) -> Any:
    """The OptimizationTask in the seed's shape, with constraints derived from the measured metrics."""
    C = compat.contracts
    trial = "decode" if "decode" in profiles else next(iter(profiles), "")
    p = profiles.get(trial, {})
    bottleneck = (f"{p.get('bottleneck', 'unknown')}-bound on {trial}: {p.get('root_cause', '')}" if p else
                  "not profiled yet (no report): see the suite timings")
    m = metrics.get(trial, {})
    regs = m.get("registers_per_thread")
    occ = m.get("achieved_occupancy_pct")
    spills = m.get("local_spill_bytes")
    reg = (f"<= {regs:.0f} regs/thread (the parent's), no local-memory spills" if regs else
           "<= 255 regs/thread and no local-memory spills (check with the profiler)")
    if spills:
        reg += f" (the parent spills {spills:.0f} bytes: remove them)"
    occ_txt = f">= the parent's achieved occupancy ({occ:.0f}%)" if occ else "keep the parent's occupancy or better"
    control = f"{selection.get('control_level', 'tile')}-level ({design_language})"
    limits = LANGUAGE_LIMITS.get(design_language, "")
    if offline:
        limits = f"CONFIG-only change of {current} (LANGUAGE stays {design_language}), " + limits
    opts = [C.PlannedOptimization(clean(o["name"]), clean(o["rationale"]), clean(o.get("link", "")))
            for o in planned]
    return C.OptimizationTask(kernel, current, new_version, clean(bottleneck), opts,
                              C.Constraints(clean(reg), clean(occ_txt), clean(control), clean(limits)))


def render_plan(kernel: str, ctx: dict[str, Any], plan: dict[str, Any], goals: list[str], iterations: int) -> str:
    """The dry run's plan: what the first iteration would do, without running anything."""
    sel = ctx.get("selection", {})
    lines = [f"PLAN for {kernel} (dry run: nothing was run on a GPU)",
             f"  start from: {ctx['current']} ({ctx['current_language']})",
             f"  trials: {', '.join(f'{t} {p}' for t, p in ctx['trial_params'].items())}",
             f"  language: {sel.get('language')} -- {sel.get('reason')}",
             f"  tuning phase: {plan['tuning']} -- {plan['tuning_why']}",
             "  optimisations:", *(f"    - {p['name']}: {p['rationale']}" for p in plan["planned"])]
    if plan.get("already_applied"):
        lines.append(f"  already applied by {ctx['current']} (not planned again): {', '.join(plan['already_applied'])}")
    for name, why in (plan.get("refuted") or {}).items():
        lines.append(f"  refuted from {ctx['current']} (not planned again): {name}: {why}")
    for name, why in (plan.get("declined") or {}).items():
        lines.append(f"  declined before (not planned again): {name}: {why}")
    if plan.get("avoid"):
        lines.append(f"  anti-patterns to avoid: {', '.join(plan['avoid'])}")
    if "proposed_change" in plan:
        lines.append(f"  offline designer would write {plan['new_version']}: {'; '.join(plan['proposed_change'])}")
    lines += [f"  verify: python -m pytest --kernel {kernel} --kernel-version {ctx['current']},{plan['new_version']} "
              f"--kforge-json <run>/verify-1.json",
              f"  goals: {', '.join(goals) or 'none (iterate --iterations times)'}; iterations: {iterations}"]
    return "\n".join(lines)
