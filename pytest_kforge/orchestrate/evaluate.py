"""EVALUATE: goals, and the keep/discard rule for a new version against its parent.

Keep rule (also in ``orchestrate/README.md``): for every trial of the matrix (decode, spec) take
``gain = (parent_median - new_median) / parent_median * 100`` and
``noise = max(parent.spread_pct, new.spread_pct)``, the larger measured run-to-run spread of the two
(from the suite results JSON).  When both rows carry ``sm_clock_mhz``, the gap between their median
SM clocks (% of the higher) is added on the side it flatters: to the bar for "faster" when the new
version ran at the higher clock, to the bar for "slower" when the parent did (see
``pytest_kforge.gpuclock``).  A version is **kept** only when

1. it is correct (every correctness test and every trial row of the new version passed), and
2. at least one trial is significantly faster (``gain > noise``), and
3. no trial is significantly slower (``gain < -noise``).

Otherwise it is **discarded** and the reason quotes the measured numbers.

A verdict must be confirmed when it clears its bar by less than the bar itself (``bar < |gain| < 2 * bar``,
:func:`borderline`): VERIFY then measures those trials again for both versions in a second suite session
(``recheck-<i>.json``), and a trial counts as slower (or faster) only when both sessions say so; one that flips is
noise.  (Run 20261207-092839-mla-3746 discarded v65_cute for a 3.9% "slowdown" on decode against a 3.0% bar: the
same kernel and plan as its parent, timed while the H100 reported ``sw_power_cap``.)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ..errors import KforgeError

__all__ = ["Goal", "parse_goal", "goals_met", "Decision", "decide", "borderline", "rows_by_trial", "version_correct"]

_GOAL_RE = re.compile(r"^\s*([a-z][a-z0-9_]*?)(?:_(us|pct_floor))?\s*(<=|>=|<|>)\s*([0-9.]+)\s*(us|%)?\s*$")


@dataclasses.dataclass(frozen=True)
class Goal:
    trial: str
    metric: str  # "median_us" | "pct_floor"
    op: str
    value: float
    text: str

    def met(self, row: Mapping[str, Any] | None) -> bool:
        if row is None or row.get(self.metric) is None or not row.get("correct", False):
            return False
        v = float(row[self.metric])
        return {"<=": v <= self.value, "<": v < self.value, ">=": v >= self.value, ">": v > self.value}[self.op]


def parse_goal(text: str) -> Goal:
    """``decode<=55us``, ``spec_us<800``, ``spec_pct_floor>=80`` (trial name first, then metric)."""
    m = _GOAL_RE.match(text)
    if not m:
        raise KforgeError(f"goal {text!r} is not understood; write <trial>[_us|_pct_floor]<op><number>, "
                          f"e.g. 'decode<=55us' or 'spec_pct_floor>=80'")
    trial, kind, op, value, unit = m.groups()
    metric = "pct_floor" if kind == "pct_floor" or unit == "%" else "median_us"
    return Goal(trial, metric, op, float(value), text.strip())


def rows_by_trial(results: Mapping[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """The trial rows of one version in a suite results JSON, keyed by trial name (read through
    :class:`~pytest_kforge.results.RunResults`, so a malformed file fails here, in one sentence)."""
    from ..results import RunResults

    if not results:
        return {}
    return {r.trial: r.to_json() for r in RunResults.from_json(results).results if r.version == version}


def version_correct(results: Mapping[str, Any], version: str) -> tuple[bool, str]:
    fails = [c for c in results.get("correctness", []) if c.get("version") == version and not c.get("passed")]
    if fails:
        return False, f"{len(fails)} correctness test(s) failed, first: {fails[0].get('test')}: " \
                      f"{fails[0].get('message', '')}".strip()
    rows = rows_by_trial(results, version)
    if not rows:
        return False, f"no trial results for {version} (the suite did not measure it)"
    bad = [t for t, r in rows.items() if not r.get("correct", False) or r.get("error")]
    if bad:
        r = rows[bad[0]]
        return False, f"trial {bad[0]} failed: {r.get('error') or 'incorrect output'}"
    return True, "correct"


def goals_met(goals: list[Goal], rows: Mapping[str, Mapping[str, Any]]) -> tuple[bool, list[str]]:
    """(all met, one line per goal).  No goals means never met (iterate until --iterations)."""
    lines = []
    for g in goals:
        row = rows.get(g.trial)
        got = "n/a" if row is None else row.get(g.metric)
        lines.append(f"{g.text}: {'met' if g.met(row) else 'not met'} (measured {got})")
    return bool(goals) and all(g.met(rows.get(g.trial)) for g in goals), lines


@dataclasses.dataclass
class Decision:
    kept: bool
    reason: str
    per_trial: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _clock_gap_pct(p: Mapping[str, Any], n: Mapping[str, Any]) -> float:
    """(new - parent) median SM clock in % of the higher; 0 when either row has none (old JSON, no NVML)."""
    try:
        pc, nc = float(p["sm_clock_mhz"]["median"]), float(n["sm_clock_mhz"]["median"])
    except (KeyError, TypeError, ValueError):
        return 0.0
    top = max(pc, nc)
    return 100.0 * (nc - pc) / top if top > 0 else 0.0


def _per_trial(prow: Mapping[str, Mapping[str, Any]], nrow: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """Gain, noise and the two bars per trial measured for both versions."""
    per: dict[str, dict[str, Any]] = {}
    for trial in sorted(set(prow) & set(nrow)):
        p, n = prow[trial], nrow[trial]
        if p.get("median_us") is None or n.get("median_us") is None:
            continue
        pu, nu = float(p["median_us"]), float(n["median_us"])
        clock = _clock_gap_pct(p, n)  # > 0: the new version ran at the higher clock
        noise = max(float(p.get("spread_pct") or 0.0), float(n.get("spread_pct") or 0.0))
        per[trial] = {"parent_us": pu, "new_us": nu, "gain_pct": round((pu - nu) / pu * 100.0, 2),
                      "noise_pct": round(noise, 2), "clock_gap_pct": round(clock, 2),
                      "faster_bar_pct": round(noise + max(clock, 0.0), 2),
                      "slower_bar_pct": round(noise + max(-clock, 0.0), 2)}
    return per


def _verdict(v: Mapping[str, Any]) -> str | None:
    """"slower", "faster" or None (inside the bars) for one trial of :func:`_per_trial`."""
    if v["gain_pct"] < -v["slower_bar_pct"]:
        return "slower"
    if v["gain_pct"] > v["faster_bar_pct"]:
        return "faster"
    return None


def borderline(per: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The trials whose verdict (slower or faster) clears its bar by less than the bar: one suite session cannot
    tell them from noise, so VERIFY measures them again (the module docstring)."""
    out = []
    for t, v in per.items():
        verdict = _verdict(v)
        bar = v["slower_bar_pct"] if verdict == "slower" else v["faster_bar_pct"]
        if verdict and abs(v["gain_pct"]) < 2.0 * bar:
            out.append(t)
    return out


def decide(results: Mapping[str, Any], parent: str, new: str,
           parent_results: Mapping[str, Any] | None = None, recheck: Mapping[str, Any] | None = None) -> Decision:
    """Apply the keep rule; ``parent_results`` defaults to ``results`` (both measured in one VERIFY run).
    ``recheck``: a second suite session's results for some trials (VERIFY's re-measurement of borderline verdicts):
    a trial it holds counts as slower or faster only when both sessions agree."""
    ok, why = version_correct(results, new)
    if not ok:
        return Decision(False, f"discarded: {new} is not correct ({why})", {})
    per = _per_trial(rows_by_trial(parent_results or results, parent), rows_by_trial(results, new))
    if not per:
        return Decision(False, f"discarded: no trial measured for both {parent} and {new}", per)
    again = _per_trial(rows_by_trial(recheck, parent), rows_by_trial(recheck, new)) if recheck else {}
    verdicts: dict[str, str | None] = {}
    for t, v in per.items():
        verdicts[t] = _verdict(v)
        if t in again:
            v["recheck_gain_pct"], v["recheck_bar_pct"] = again[t]["gain_pct"], max(again[t]["slower_bar_pct"],
                                                                                    again[t]["faster_bar_pct"])
            if _verdict(again[t]) != verdicts[t]:
                v["recheck_verdict"] = "not confirmed"
                verdicts[t] = None
            else:
                v["recheck_verdict"] = "confirmed"

    def one(t: str, v: Mapping[str, Any]) -> str:
        text = f"{t} {v['parent_us']:.1f}->{v['new_us']:.1f} us ({v['gain_pct']:+.1f}%, spread {v['noise_pct']:.1f}%"
        if v["clock_gap_pct"]:
            text += f", new version's SM clock {v['clock_gap_pct']:+.1f}%"
        if "recheck_gain_pct" in v:
            text += f"; measured again: {v['recheck_gain_pct']:+.1f}%, {v['recheck_verdict']}"
        return text + ")"

    desc = "; ".join(one(t, v) for t, v in per.items())
    slower = [t for t, w in verdicts.items() if w == "slower"]
    faster = [t for t, w in verdicts.items() if w == "faster"]
    if slower:
        return Decision(False, f"discarded: significantly slower on {', '.join(slower)}: {desc}", per)
    if not faster:
        return Decision(False, f"discarded: no gain beyond the run-to-run spread: {desc}", per)
    return Decision(True, f"kept: faster beyond the spread on {', '.join(faster)}: {desc}", per)
