"""The side-by-side run as one row per shape: where the candidates are many trials wide (issue 35's serving shapes).

:func:`benchmarks.compare.render_markdown` puts a candidate on each row and a trial in each column, which stays
readable for two trials.  For a sweep of shapes (``serve_*``) this renders the transpose: one row per trial, its
parameters and floor, each candidate's device time, the fastest correct candidate, and the first version against
the fastest correct peer, in percent (negative: the version is ahead).  ``python -m benchmarks.compare ...
--by-trial`` writes it instead of the candidate table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render_by_trial", "margin"]

#: parameters worth showing for a shape, in this order (others follow)
_FIRST = ("b", "s", "h", "t", "ragged")


def margin(version_us: float, peer_us: float) -> float:
    """The version's time against the peer's, in percent: -5.0 means 5% faster than the peer."""
    return 100.0 * (version_us / peer_us - 1.0)


def _shape(params: Mapping[str, Any]) -> str:
    keys = [k for k in _FIRST if k in params] + sorted(k for k in params if k not in _FIRST)
    return " ".join(f"{k}={params[k]}" for k in keys)


def _us(cell: Any) -> float | None:
    """A cell's median when it is a correct, timed result (else None: not comparable)."""
    if cell is None or not cell.correct or cell.median_us is None:
        return None
    return float(cell.median_us)


def _show(cell: Any) -> str:
    if cell is None:
        return "-"
    us = _us(cell)
    if us is not None:
        return f"{us:,.1f}" + (" (suspect)" if cell.message else "")
    if cell.correct is False:
        return "wrong"
    return "unsupported" if cell.message else "-"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def render_by_trial(rows: Sequence[Any], meta: Mapping[str, Any], command: str) -> str:
    """The markdown table of ``rows`` (:class:`benchmarks.compare.Row`) with one line per trial of ``meta``."""
    trials = list(meta["trials"])
    live = [r for r in rows if not r.skipped]
    version = next((r for r in live if r.kind == "version"), None)
    peers = [r for r in live if r.kind == "peer"]
    head = ["trial", "shape", "floor us", *(f"{r.name} us" for r in live), "fastest"]
    if version is not None and peers:
        head.append(f"{version.name} vs fastest peer")
    # a JSON from before the back-to-back host figure keeps its old column (the devlog blocks re-render from it)
    b2b = version is not None and any(getattr(c, "host_b2b_us", None) is not None for c in version.cells.values())
    if version is not None:
        head.append(f"{version.name} host us, back to back / one timed round" if b2b else f"{version.name} host us")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    wins = {"ahead": 0, "behind": 0}
    for t in trials:
        tm = meta["trials"][t]
        cells = {r.name: r.cells.get(t) for r in live}
        timed = {n: us for n, c in cells.items() if (us := _us(c)) is not None}
        fastest = min(timed, key=lambda n: timed[n]) if timed else "-"
        line = [t, _shape(tm.get("params", {})), f"{tm['floor_us']:,.1f}", *(_show(cells[r.name]) for r in live),
                fastest]
        if version is not None and peers:
            best_peer = min((p.name for p in peers if p.name in timed), key=lambda n: timed[n], default=None)
            if version.name in timed and best_peer is not None:
                m = margin(timed[version.name], timed[best_peer])
                wins["ahead" if m < 0 else "behind"] += 1
                line.append(f"{m:+.1f}% ({best_peer})")
            else:
                line.append("-")
        if version is not None:
            c = version.cells.get(t)
            cold = _num(getattr(c, "host_us", None))
            line.append(f"{_num(getattr(c, 'host_b2b_us', None))} / {cold}" if b2b else cold)
        lines.append("| " + " | ".join(line) + " |")
    info = [f"Measured {meta.get('measured', '-')} on {meta.get('gpu') or meta.get('device', '-')}, timer: "
            f"{meta.get('timer') or '-'}, median of {meta.get('rounds', '-')} rounds after {meta.get('warmup', '-')} "
            f"warm-up, seed {meta.get('seed', '-')}."]
    if version is not None and peers:
        info.append(f"- {version.name} against the fastest correct peer of each shape: ahead on {wins['ahead']}, "
                    f"behind on {wins['behind']} (a negative percentage: {version.name} is faster).")
    info.append("- a cell: the median device time of a correct run (`suspect`: the timer flagged it, see the JSON); "
                "`wrong`: it failed the check; `unsupported`: the candidate cannot run the shape.")
    if meta.get("roofline"):
        info.append(f"- floors from the {meta['roofline']}")
    for key, note in meta.get("notes", {}).items():
        info.append(f"- {key}: {note}")
    for r in rows:
        if r.skipped:
            info.append(f"- {r.name}: skipped: {r.skipped}")
    info.append(f"- command: `{command}`")
    return "\n".join([*info, "", *lines]) + "\n"
