"""LEARN and the devlog: what a measured result teaches, written to the knowledge base and devlog.

LEARN is mandatory whenever a result is a reusable pattern, refines a condition or refutes a
belief (seed).  The rule applied to one evaluated version (all knowledge calls name entries by
their catalog ``name``; an entry planned twice, by title and by name, counts once):

1. **Only applied entries learn.**  An entry is applied when a line of the designer's summary
   names it (name or title, e.g. ``NUM_SPLITS: None -> 2 (split-kv-combine)``) or, for a CONFIG line
   naming no entry, when the changed knob is that entry's knob (:func:`knob_serves`).  A planned
   entry that was not applied gets nothing: no evidence, no condition change.
2. **Per trial, only where the trigger fired.**  For each applied entry and each trial, the entry's
   triggers are evaluated on the PARENT's profile metrics of that trial.  Every trial gets an
   evidence row (a trial where the trigger did not hold is marked ``(trigger not met)``), but only
   trials where a trigger fired are evidence about the entry's conditions.  A significant regression
   on a trial where the trigger did not fire is recorded as a Pitfall note (``applying it where the
   trigger does not hold (spec, waves_per_sm=7.76) cost +26%``) and nothing else.
3. **Narrowing** (discarded, a fired trial significantly slower): a trigger that fired where the change hurt
   gets one added conjunct ``metric op threshold`` that holds for the parent metrics of every fired trial
   where the change helped and fails for every fired trial where it hurt (:func:`narrowed_triggers`, in
   :mod:`.narrow` with the rest of the trigger arithmetic). When no fired trial helped, or no measured metric
   separates them, nothing is narrowed: evidence plus a Pitfall note. A new trigger must parse, be satisfiable
   and hold on the helped trials' metrics (:func:`satisfiable`), else it is not written.
4. **Anti-pattern** only when the change INTRODUCED the technique (every CONFIG line applying it
   turns its knob on from an off value -- 0, 1, False, "off" -- or, for a code change, the parent's
   CONFIG has no enabled knob of the technique) AND it is slower by more than twice the spread
   (at least 1%) on EVERY trial where its trigger fired.  A retune of a knob the parent already
   uses (v5's ``NUM_SPLITS: None`` is automatic and already splits; None -> 4 is a retune) never
   converts an entry: evidence plus a Pitfall note.
5. A derived opportunity (the profiler's, from counters; not in the catalog) that the summary names
   becomes an entry (:func:`pytest_kforge.knowledge.derived.learn_derived`).
6. A kept manual change with no catalog entry applied and > 5% gain on a trial -> ``add_entry``
   (a new language-scoped pattern, local evidence only).  An incorrect version teaches nothing
   about speed (devlog entry only).

Knowledge calls go through :func:`kb_call`, which reports, never raises, a failure (the run goes on).
LEARN is idempotent: evidence rows and pitfall notes already in the entry are not written again.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text, file_lock
from ..knowledge.derived import learn_derived
from ..profile.derive import spec_for
from .agents.offline import knob_off, knob_serves, parse_change
from .narrow import failing as _failing
from .narrow import fired as _fired
from .narrow import narrowed_triggers, satisfiable
from .narrow import parsed as _parsed

__all__ = ["kb_call", "learn", "applied_entries", "unique_by_entry", "narrowed_triggers", "satisfiable",
           "perf_body", "append_devlog_entry", "devlog_entry", "read_block"]


def read_block(text: str, key: str) -> str:
    m = re.search(rf"<!-- kforge:{key}:start -->(.*?)<!-- kforge:{key}:end -->", text, re.S)
    return m.group(1).strip() if m else ""


def kb_call(kb: Any, method: str, *args: Any, **kwargs: Any) -> str:
    """Call ``kb.<method>``; a one-line outcome for the run log (a failure is reported, never raised)."""
    fn = getattr(kb, method, None)
    label = f"{method}({args[0] if args else ''})"
    if fn is None:
        return f"skipped {label}: the knowledge base has no such method"
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - learning must not lose the run
        return f"failed {label}: {exc}"
    return label


def unique_by_entry(planned: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``planned`` with one item per catalog entry name (the first), placeholders kept once by name."""
    seen: set[str] = set()
    out = []
    for p in planned:
        key = p.get("entry") or p.get("name", "")
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _mentions(text: str, needle: str) -> bool:
    return bool(needle) and re.search(rf"(?<![\w-]){re.escape(needle)}(?![\w-])", text, re.I) is not None


#: a change line that reports an entry left out rather than applied
_NOT_APPLIED = re.compile(r"\bnot\s+(?:applied|tried|used|attempted)\b|\bskipped\b|\bleft\s+out\b", re.I)


def applied_entries(candidates: Sequence[tuple[str, str]], changes: Sequence[str]) -> dict[str, list[str]]:
    """Entry name -> the summary's change lines that applied it, for ``candidates`` = (name, title) pairs.

    A line naming entries applies those; a CONFIG line naming none applies the entries whose knob it
    changed (:func:`knob_serves`); a free-text line naming none applies nothing; a line that says what was
    *not* applied (``relax-occupancy-limit not applied: ...``, ``skipped``) applies nothing (run
    20261206-115434-mla-165a: such a line made LEARN record an untried entry as tested)."""
    out: dict[str, list[str]] = {}
    cands = list(dict.fromkeys(candidates))
    for line in changes:
        if _NOT_APPLIED.search(line):  # judged per change: the contract splits Changes Applied on "; "
            continue
        named = [n for n, t in cands if _mentions(line, n) or _mentions(line, t)]
        if not named and (pc := parse_change(line)) is not None:
            named = [n for n, t in cands if knob_serves(pc[0], f"{n} {t}")]
        for n in dict.fromkeys(named):
            out.setdefault(n, []).append(line)
    return out


# -- triggers: which fired, what failed, narrowing, satisfiability --------------------------------------------
# -- LEARN ----------------------------------------------------------------------------------------------------
def _row(kernel: str, parent: str, new: str, trial: str, v: dict[str, float], gpu: str, mark: str) -> dict[str, str]:
    return {"config": f"{kernel} {trial}, {gpu}{mark}", "before": f"{v['parent_us']:.1f} us ({parent})",
            "after": f"{v['new_us']:.1f} us ({new})", "change": f"{-v['gain_pct']:+.1f}%"}


def _introduced(lines: list[str], entry: Any, parent_config: dict[str, Any] | None) -> tuple[bool, str]:
    """(the change introduced the technique, why) -- see rule 4 of the module docstring."""
    knobs = [pc for ln in lines if (pc := parse_change(ln)) is not None]
    if knobs:
        retunes = [f"{k} {o!r} -> {n!r}" for k, o, n, _l in knobs if not (knob_off(o) and not knob_off(n))]
        if retunes:
            return False, f"a retune of a knob the parent already uses ({'; '.join(retunes)})"
        return True, "introduced by " + "; ".join(f"{k} {o!r} -> {n!r}" for k, o, n, _l in knobs)
    text = f"{getattr(entry, 'name', '')} {getattr(entry, 'title', '')}"
    on = [f"{k}={v!r}" for k, v in (parent_config or {}).items() if knob_serves(k, text) and not knob_off(v)]
    if on:
        return False, f"the parent already has {', '.join(on)}"
    return True, "introduced by a code change"


def _add_pitfall(kb: Any, entry: Any, note: str) -> str:
    """A dated Pitfalls note on the entry (once; a repeat of the same note is skipped)."""
    name = entry.name
    if " ".join(note.split()) in " ".join(str(getattr(entry, "text", "")).split()):
        return f"pitfall already noted on {name}"
    return kb_call(kb, "add_pitfall", name, note)


def learn(kb: Any, *, kernel: str, parent: str, new: str, language: str, decision: dict[str, Any],
          planned: list[dict[str, Any]], changes: list[str], metrics: dict[str, dict[str, float]],
          parent_config: dict[str, Any] | None = None, gpu: str = "H200") -> list[str]:
    """Apply the LEARN rule (module docstring); returns one line per knowledge update (or why none).

    ``planned``: STRATEGIZE's picks, ``{"name": <entry name>, "title": ...}``; ``metrics``: the
    PARENT's per-trial profile metrics (where the entries were matched); ``parent_config``: the
    parent's CONFIG (to tell a retune from an introduction when a change is not a CONFIG line).
    """
    per = decision.get("per_trial", {})
    if not per:
        return ["nothing learned about speed: the version was not measured correct"]
    known = {getattr(e, "name", None): e for e in kb.entries()}
    names = list(dict.fromkeys(p["name"] for p in planned if p.get("name")))
    derived = [n for n in names if n not in known and spec_for(n) is not None]  # the profiler's, from counters
    out: list[str] = [f"{n} is not a catalog entry (named by the profiler): nothing to update"
                      for n in names if n not in known and n not in derived]
    # a derived opportunity is named by its name or its title (STRATEGIZE shows the title once LEARN wrote it)
    tested = applied_entries([(n, spec.title if (spec := spec_for(n)) else n) for n in derived], changes)
    out += [learn_derived(kb, n, kernel=kernel, parent=parent, new=new, language=language, per=per, metrics=metrics,
                          changes=tested[n], kept=bool(decision.get("kept")), gpu=gpu) if n in tested else
            f"{n} (derived from counters) was planned but not applied: nothing learned about it" for n in derived]
    cands = [(n, str(getattr(known[n], "title", "") or n)) for n in names if n in known]
    applied = applied_entries(cands, changes)
    out += [f"{n} was planned but not applied ({'; '.join(changes) or 'no change listed'}): nothing learned about it"
            for n, _t in cands if n not in applied]
    gains = [v["gain_pct"] for v in per.values()]
    for n, lines in applied.items():
        out += _learn_entry(kb, known[n], lines, kernel=kernel, parent=parent, new=new, per=per, metrics=metrics,
                            parent_config=parent_config, kept=bool(decision.get("kept")), gpu=gpu,
                            reason=str(decision.get("reason", "")))
    manual = not applied and (not names or all("manual promising tile" in c for c in changes))
    if decision.get("kept"):
        if manual and max(gains) > 5.0:
            rows = [_row(kernel, parent, new, t, v, gpu, "") for t, v in per.items()]
            out.append(_new_entry(kb, kernel=kernel, parent=parent, new=new, language=language, changes=changes,
                                  rows=rows, gains=gains, metrics=metrics, gpu=gpu))
        return out or ["kept with no catalog entry and <= 5% gain: devlog entry only"]
    return out or ["discarded with no catalog entry applied: devlog entry only"]


def _learn_entry(kb: Any, entry: Any, lines: list[str], *, kernel: str, parent: str, new: str,
                 per: dict[str, dict[str, float]], metrics: dict[str, dict[str, float]],
                 parent_config: dict[str, Any] | None, kept: bool, gpu: str, reason: str) -> list[str]:
    """Rules 2-4 of the module docstring for one applied entry."""
    n, triggers = entry.name, list(getattr(entry, "triggers", []) or [])
    fired = {t: _fired(triggers, metrics.get(t)) for t in per}
    out = []
    have = {(r.config, r.after) for r in getattr(entry, "evidence_rows", lambda _s: [])("local")}
    for t, v in per.items():
        mark = "" if fired[t] else (" (trigger not met)" if metrics.get(t) else " (parent not profiled)")
        r = _row(kernel, parent, new, t, v, gpu, mark)
        if (r["config"], r["after"]) not in have:  # a LEARN redone after a kill adds nothing twice
            out.append(kb_call(kb, "add_evidence", n, r, source="local"))
    if kept:
        return out
    what = "; ".join(c.split(" (")[0] for c in lines)
    slow = {t for t, v in per.items() if v["gain_pct"] < -v["noise_pct"]}
    for t in sorted(slow - {t for t in per if fired[t]}):
        if metrics.get(t):
            out.append(_add_pitfall(kb, entry, f"applying it where the trigger does not hold ({t}, "
                                    f"{_failing(triggers, metrics[t])}) cost {-per[t]['gain_pct']:+.0f}% "
                                    f"({what}: {parent} -> {new})"))
    hurt = [t for t in per if fired[t] and t in slow]
    if not hurt:
        return out
    helped = [t for t in per if fired[t] and per[t]["gain_pct"] > per[t]["noise_pct"]]
    intro, why = _introduced(lines, entry, parent_config)
    where = ", ".join(f"{t} ({_parsed(fired[t][0]).describe(metrics[t])}) {-per[t]['gain_pct']:+.0f}%" for t in hurt)
    bad_everywhere = all(per[t]["gain_pct"] < -2 * max(per[t]["noise_pct"], 1.0) for t in per if fired[t])
    if intro and bad_everywhere:
        return out + [kb_call(kb, "to_anti_pattern", n, f"{why} ({parent} -> {new}), slower beyond twice the "
                              f"spread on every trial where its trigger held: {reason}")]
    narrowed = narrowed_triggers(triggers, [metrics[t] for t in helped], [metrics[t] for t in hurt]) \
        if helped else None
    if narrowed is not None and narrowed != triggers:
        return out + [kb_call(kb, "narrow_conditions", n, narrowed, reason=f"{what} ({parent} -> {new}) helped "
                              f"{', '.join(helped)} but was slower on {where}: {reason}")]
    because = (why if not intro else "no trial where its trigger held got faster" if not helped
               else "no measured metric separates the trials where it helped from those where it hurt")
    return out + [_add_pitfall(kb, entry, f"{what} ({parent} -> {new}) was slower where its trigger holds: "
                               f"{where}; conditions kept ({because})")]


def _new_entry(kb: Any, *, kernel: str, parent: str, new: str, language: str, changes: list[str],
               rows: list[dict[str, str]], gains: list[float], metrics: dict[str, dict[str, float]],
               gpu: str = "GPU") -> str:
    """A kept manual change with a clear gain: a new language-scoped entry (local evidence only)."""
    knobs = [c.split(":")[0].strip() for c in changes if ":" in c] or ["config"]
    name = re.sub(r"[^a-z0-9]+", "-", f"{kernel} {' '.join(knobs)} {language} tuning".lower()).strip("-")
    if any(getattr(e, "name", None) == name for e in kb.entries()):
        return "; ".join(kb_call(kb, "add_evidence", name, r, source="local") for r in rows)
    m = next(iter(metrics.values()), {})
    metric = next((k for k in ("achieved_occupancy_pct", "dram_pct", "tensor_pct") if m.get(k)), None)
    trig = [f"{metric} <= {m[metric] * 1.1:.4g}"] if metric else ["duration_us > 0"]
    scope = language if language in ("cutile-dsl", "cute-dsl") else "shared"
    what = "; ".join(c.split(" (")[0] for c in changes)
    return kb_call(
        kb, "add_entry", name, kind="optimization", scope=scope, title=f"{kernel}: {what} ({language})",
        contexts=[f"{kernel}-specific ({language} versions derived from {parent})", f"the GPU it was measured on ({gpu})"],
        triggers=trig, est_gain=round(max(gains), 1), mechanism=f"A CONFIG change found by the orchestrator: {what}.",
        affected_metrics=["duration_us", *( [metric] if metric else [])],
        implementation="CONFIG = {**PARENT_CONFIG, " + ", ".join(
            f"{c.split(':')[0].strip()!r}: {c.split('->')[-1].split('(')[0].strip()}" for c in changes if "->" in c)
        + "}", generalization="Local tuning evidence only; re-measure before applying it to another kernel or GPU.",
        pitfalls=["a single measured point: the best value may move with the trial's shape"],
        interactions=["re-tune after any change of tile shape or split count"], applies_to=[kernel],
        languages=[language], evidence=rows, source="local")


def append_devlog_entry(devlog: Path, entry: str) -> None:
    """Append ``entry`` at the end of the ``## Versions`` section (created if absent), under a lock.

    Idempotent: an entry whose heading line is already there is not written again."""
    devlog = Path(devlog)
    with file_lock(devlog):
        text = devlog.read_text(encoding="utf-8") if devlog.exists() else ""
        if entry.splitlines()[0] in text:
            return  # already written (a LEARN step redone after a kill)
        m = re.search(r"^## Versions\s*$", text, re.M)
        if m is None:
            text = text.rstrip() + ("\n\n" if text else "") + "## Versions\n\n" + entry.rstrip() + "\n"
        else:
            nxt = re.search(r"^## (?!#)", text[m.end():], re.M)
            cut = m.end() + nxt.start() if nxt else len(text)
            text = text[:cut].rstrip() + "\n\n" + entry.rstrip() + "\n" + ("\n" + text[cut:] if nxt else "")
        atomic_write_text(devlog, text)


def _num(x: Any) -> str:
    """One decimal for a measured number (``130.9``), ``n/a`` when it was not measured."""
    return f"{float(x):.1f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


def designer_prediction(version_file: Path) -> str:
    """The version's own prediction: the docstring paragraph that starts with ``Prediction`` (the design skills ask
    for one, written before the first run), one line, or "" when the file has none."""
    import ast

    try:
        doc = ast.get_docstring(ast.parse(version_file.read_text(encoding="utf-8"))) or ""
    except (OSError, SyntaxError, ValueError):
        return ""
    for para in doc.split("\n\n"):
        if para.lstrip().lower().startswith("prediction"):
            text = " ".join(para.split())
            return text.split(":", 1)[1].strip() if ":" in text[:60] else text
    return ""


def devlog_entry(*, new: str, parent: str, language: str, changes: list[str], rationale: list[str],
                 prediction: str, decision: dict[str, Any], rows: dict[str, dict[str, Any]],
                 metrics: dict[str, dict[str, float]], command: str, run_id: str) -> str:
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    lines = [f"### {new} ({language}, from {parent}) -- {date}, orchestrator run {run_id}", "",
             f"**What changed:** {'; '.join(changes) or 'n/a'}", "",
             f"**Why:** {' '.join(rationale) or 'manual promising tile (no catalog match)'}", "",
             f"**Prediction:** {prediction}", "",
             f"**Result:** {decision.get('reason', '')}", "",
             "| Trial | Median (us) | Spread (%) | % of floor | Correct | Note |",
             "|-------|-------------|------------|------------|---------|------|"]
    for t, r in rows.items():
        lines.append(f"| {t} | {_num(r.get('median_us'))} | {_num(r.get('spread_pct'))} | {_num(r.get('pct_floor'))} | "
                     f"{r.get('correct')} | {r.get('note') or ''} |")
    for t, m in metrics.items():
        lines.append(f"\nKey metrics ({t}): " + ", ".join(f"{k}={v:g}" for k, v in m.items()))
    lines += ["", f"Command: `{command}`"]
    return "\n".join(lines) + "\n"


def perf_body(root: Path, kernel: str, version: str, profiles: dict[str, Any], run_id: str) -> str:
    """The devlog ``perf`` block: the profile owner's table of saved ncu reports when this version
    has them (``reports/<kernel>/<version>/<trial>.md``), else the contracts themselves."""
    head = f"_Updated by orchestrator run {run_id}_\n\n"
    body = ""
    if any((root / "reports" / kernel / version / f"{t}.md").exists() for t in profiles):
        try:
            from ..profile.report import perf_block

            body = perf_block(root / "reports", kernel)
        except Exception:  # noqa: BLE001 - no profile module: render the contracts
            body = ""
    if not body.strip():
        from . import compat

        C = compat.contracts
        body = "\n".join(C.ProfileContract.from_dict(d).render() for d in profiles.values())
    return head + body
