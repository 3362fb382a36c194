"""LEARN and the devlog: what a measured result teaches, written to the knowledge base and devlog.

LEARN is mandatory whenever a result is a reusable pattern, refines a condition or refutes a
belief (seed).  The rule applied to one evaluated version:

* kept, change guided by catalog entries  -> ``add_evidence`` on each entry (it worked here);
* kept, manual change with no catalog entry and > 5% gain on a trial -> ``add_entry`` (a new
  reusable pattern, labelled as local evidence);
* discarded, no gain beyond the spread    -> ``add_evidence`` (neutral: refines the estimate);
* discarded, significantly slower         -> ``add_evidence`` (negative) and ``narrow_conditions``
  with the metric values under which it failed; when it is slower beyond twice the spread on
  every trial, ``to_anti_pattern`` (the belief is refuted here);
* incorrect                                -> nothing learned about speed (devlog entry only).

Knowledge calls are made through :func:`kb_call`, which passes only the keyword arguments the
knowledge owner's method accepts and reports, never raises, a failure (the run goes on).
"""

from __future__ import annotations

import datetime as _dt
import inspect
import re
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text, file_lock

__all__ = ["kb_call", "learn", "append_devlog_entry", "read_block", "best_version_from_devlog"]


def read_block(text: str, key: str) -> str:
    m = re.search(rf"<!-- kforge:{key}:start -->(.*?)<!-- kforge:{key}:end -->", text, re.S)
    return m.group(1).strip() if m else ""


def best_version_from_devlog(text: str, known: list[str]) -> str | None:
    """The first version named in the devlog's ``best`` block that exists."""
    for name in re.findall(r"\b(v\d+(?:_[a-z0-9_]+)?)\b", read_block(text, "best")):
        if name in known:
            return name
    return None


def kb_call(kb: Any, method: str, **kwargs: Any) -> str:
    """Call ``kb.<method>`` with the kwargs it accepts; a one-line outcome for the run log."""
    fn = getattr(kb, method, None)
    if fn is None:
        return f"skipped {method}: the knowledge base has no such method"
    try:
        params = inspect.signature(fn).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            accepted = {k: v for k, v in kwargs.items() if k in params}
            positional = [kwargs[n] for n, p in params.items() if p.default is p.empty and n in kwargs
                          and p.kind is p.POSITIONAL_ONLY]
            for n in [n for n, p in params.items() if p.kind is p.POSITIONAL_ONLY]:
                accepted.pop(n, None)
            fn(*positional, **accepted)
        else:
            fn(**kwargs)
    except Exception as exc:  # noqa: BLE001 - learning must not lose the run
        return f"failed {method}({kwargs.get('name', '')}): {type(exc).__name__}: {exc}"
    return f"{method}({kwargs.get('name', '')})"


def _evidence(kernel: str, parent: str, new: str, per_trial: dict[str, dict[str, float]]) -> dict[str, Any]:
    rows = [{"config": f"{kernel} {t}", "before": f"{v['parent_us']:.1f} us ({parent})",
             "after": f"{v['new_us']:.1f} us ({new})", "change": f"{-v['gain_pct']:+.1f}%"} for t, v in per_trial.items()]
    return {"source": "local experiment", "rows": rows}


def learn(kb: Any, *, kernel: str, parent: str, new: str, language: str, decision: dict[str, Any],
          applied: list[dict[str, Any]], changes: list[str], metrics: dict[str, dict[str, float]]) -> list[str]:
    """Apply the LEARN rule; returns one line per knowledge update (or why none)."""
    per = decision.get("per_trial", {})
    if not per:
        return ["nothing learned about speed: the version was not measured correct"]
    ev = _evidence(kernel, parent, new, per)
    names = [a["name"] for a in applied if a.get("name")]
    out: list[str] = []
    gains = [v["gain_pct"] for v in per.values()]
    if decision.get("kept"):
        for n in names:
            out.append(kb_call(kb, "add_evidence", name=n, evidence=ev, rows=ev["rows"], source=ev["source"]))
        if not names and max(gains) > 5.0:
            title = f"{kernel}: {'; '.join(c.split(' (')[0] for c in changes)}"
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
            out.append(kb_call(kb, "add_entry", name=slug, title=title, kind="optimization", language=language,
                               languages=[language], when_to_apply=[f"{kernel}-specific", f"language {language}"],
                               mechanism="; ".join(changes), evidence=ev, rows=ev["rows"], source=ev["source"]))
        return out or ["kept with no catalog entry and <= 5% gain: devlog entry only"]
    slower = [t for t, v in per.items() if v["gain_pct"] < -v["noise_pct"]]
    for n in names:
        out.append(kb_call(kb, "add_evidence", name=n, evidence=ev, rows=ev["rows"], source=ev["source"]))
        if slower:
            m = metrics.get(slower[0], {})
            cond = [f"{k} = {v:g} here made it slower" for k, v in m.items()
                    if k in ("dram_pct", "achieved_occupancy_pct", "tensor_pct")]
            out.append(kb_call(kb, "narrow_conditions", name=n, conditions=cond, reason=decision.get("reason", "")))
            if all(v["gain_pct"] < -2 * max(v["noise_pct"], 1.0) for v in per.values()):
                out.append(kb_call(kb, "to_anti_pattern", name=n, reason=decision.get("reason", ""), evidence=ev))
    return out or ["discarded with no catalog entry involved: devlog entry only"]


def append_devlog_entry(devlog: Path, entry: str) -> None:
    """Append ``entry`` at the end of the ``## Versions`` section (created if absent), under a lock."""
    devlog = Path(devlog)
    with file_lock(devlog):
        text = devlog.read_text(encoding="utf-8") if devlog.exists() else ""
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
