"""LEARN and the devlog: what a measured result teaches, written to the knowledge base and devlog.

LEARN is mandatory whenever a result is a reusable pattern, refines a condition or refutes a
belief (seed).  The rule applied to one evaluated version:

* every measured version guided by catalog entries -> ``add_evidence`` on each entry, one
  Config | Before | After | Change row per trial (it worked, did nothing, or hurt: all refine it);
* kept, manual change with no catalog entry and > 5% gain on a trial -> ``add_entry`` (a new
  language-scoped pattern, local evidence only);
* discarded, significantly slower -> when it is slower beyond twice the spread on every trial,
  ``to_anti_pattern`` (the belief is refuted here); otherwise ``narrow_conditions`` to exclude the
  measured point where it failed (:func:`narrowed_triggers`);
* incorrect                                -> nothing learned about speed (devlog entry only).

Knowledge calls go through :func:`kb_call`, which reports, never raises, a failure (the run goes on).
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text, file_lock

__all__ = ["kb_call", "learn", "narrowed_triggers", "perf_body", "append_devlog_entry", "read_block", "best_version_from_devlog"]


def read_block(text: str, key: str) -> str:
    m = re.search(rf"<!-- kforge:{key}:start -->(.*?)<!-- kforge:{key}:end -->", text, re.S)
    return m.group(1).strip() if m else ""


def best_version_from_devlog(text: str, known: list[str]) -> str | None:
    """The first version named in the devlog's ``best`` block that exists."""
    for name in re.findall(r"\b(v\d+(?:_[a-z0-9_]+)?)\b", read_block(text, "best")):
        if name in known:
            return name
    return None


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


def _rows(kernel: str, parent: str, new: str, per_trial: dict[str, dict[str, float]], gpu: str) -> list[dict[str, str]]:
    return [{"config": f"{kernel} {t}, {gpu}", "before": f"{v['parent_us']:.1f} us ({parent})",
             "after": f"{v['new_us']:.1f} us ({new})", "change": f"{-v['gain_pct']:+.1f}%"} for t, v in per_trial.items()]


def narrowed_triggers(triggers: list[str], metrics: dict[str, float]) -> list[str]:
    """Each trigger, restricted to exclude the measured point where the entry failed.

    For the first comparison of a trigger, ``m > x`` (or >=) becomes ``(...) and m < v`` and
    ``m < x`` becomes ``(...) and m > v``, with ``v`` the value measured where it failed.
    """
    out = []
    for t in triggers:
        found = re.search(r"([a-z_][a-z0-9_]*)\s*(<=|>=|<|>)", t)
        if not found or found.group(1) not in metrics:
            out.append(t)
            continue
        m, op = found.groups()
        v = metrics[m]
        out.append(f"({t}) and {m} {'<' if op.startswith('>') else '>'} {v:.4g}")
    return out


def learn(kb: Any, *, kernel: str, parent: str, new: str, language: str, decision: dict[str, Any],
          applied: list[dict[str, Any]], changes: list[str], metrics: dict[str, dict[str, float]],
          gpu: str = "H200") -> list[str]:
    """Apply the LEARN rule; returns one line per knowledge update (or why none).

    ``metrics`` are the parent's (the conditions under which the entries were matched and applied).
    """
    per = decision.get("per_trial", {})
    if not per:
        return ["nothing learned about speed: the version was not measured correct"]
    rows = _rows(kernel, parent, new, per, gpu)
    known = {getattr(e, "name", None): e for e in kb.entries()}
    out: list[str] = [f"{a['name']} is not a catalog entry (named by the profiler): nothing to update"
                      for a in applied if a.get("name") and a["name"] not in known]
    names = [a["name"] for a in applied if a.get("name") in known]
    gains = [v["gain_pct"] for v in per.values()]
    for n in names:
        # a LEARN redone after a kill must not add the same rows twice
        have = {(r.config, r.after) for r in getattr(known[n], "evidence_rows", lambda _s: [])("local")}
        out += [kb_call(kb, "add_evidence", n, r, source="local") for r in rows if (r["config"], r["after"]) not in have]
    if decision.get("kept"):
        if not names and max(gains) > 5.0 and not [a for a in applied if a.get("name")]:
            out.append(_new_entry(kb, kernel=kernel, parent=parent, new=new, language=language, changes=changes,
                                  rows=rows, gains=gains, metrics=metrics))
        return out or ["kept with no catalog entry and <= 5% gain: devlog entry only"]
    slower = [t for t, v in per.items() if v["gain_pct"] < -v["noise_pct"]]
    if slower:
        m = metrics.get(slower[0], {})
        for n in names:
            entry = known[n]
            if all(v["gain_pct"] < -2 * max(v["noise_pct"], 1.0) for v in per.values()):
                out.append(kb_call(kb, "to_anti_pattern", n, decision.get("reason", "slower")))
            elif entry is not None and getattr(entry, "triggers", None):
                out.append(kb_call(kb, "narrow_conditions", n, narrowed_triggers(list(entry.triggers), m),
                                   reason=decision.get("reason", "")))
    return out or ["discarded with no catalog entry involved: devlog entry only"]


def _new_entry(kb: Any, *, kernel: str, parent: str, new: str, language: str, changes: list[str],
               rows: list[dict[str, str]], gains: list[float], metrics: dict[str, dict[str, float]]) -> str:
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
        contexts=[f"{kernel}-specific ({language} versions derived from {parent})", "same GPU class (H200)"],
        triggers=trig, est_gain=round(max(gains), 1), mechanism=f"A CONFIG change found by the orchestrator: {what}.",
        affected_metrics=["duration_us", *( [metric] if metric else [])],
        implementation="CONFIG = {**PARENT_CONFIG, " + ", ".join(
            f"{c.split(':')[0].strip()!r}: {c.split('->')[-1].split('(')[0].strip()}" for c in changes if "->" in c)
        + "}", generalization="Local tuning evidence only; re-measure before applying it to another kernel or GPU.",
        pitfalls=["a single measured point: the best value may move with b, s and t"],
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
        lines.append(f"| {t} | {r.get('median_us')} | {r.get('spread_pct')} | {r.get('pct_floor')} | "
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
