"""Trigger arithmetic for LEARN: which triggers fired on a profile, which values failed, whether a trigger can
hold at all, and the narrowing of a trigger that fired where a change hurt (:mod:`.learn`'s rule 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["parsed", "fired", "failing", "satisfiable", "narrowed_triggers"]


def parsed(text: str) -> Any:
    """``text`` parsed as a trigger, or None when it does not parse (a malformed trigger never fires)."""
    from ..knowledge import parse_trigger

    try:
        return parse_trigger(text)
    except Exception:  # noqa: BLE001 - a malformed trigger never fires
        return None


def fired(triggers: Sequence[str], m: dict[str, float] | None) -> list[str]:
    return [t for t in triggers if m and (p := parsed(t)) is not None and p.holds(m)]


def failing(triggers: Sequence[str], m: dict[str, float]) -> str:
    """``waves_per_sm=7.76`` -- the measured values of the comparisons that did not hold."""
    ops = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__, "==": float.__eq__,
           "!=": float.__ne__}
    bad: dict[str, float] = {}

    def walk(n: tuple[Any, ...]) -> None:
        if n[0] != "cmp":
            for c in n[1]:
                walk(c)
        elif n[1] in m and not ops[n[2]](float(m[n[1]]), n[3]):
            bad[n[1]] = float(m[n[1]])
    for t in triggers:
        if (p := parsed(t)) is not None:
            walk(p.node)
    return ", ".join(f"{k}={v:.4g}" for k, v in bad.items()) or "its metrics not measured"


def _dnf(node: tuple[Any, ...]) -> list[list[tuple[Any, ...]]]:
    if node[0] == "cmp":
        return [[node]]
    parts = [_dnf(c) for c in node[1]]
    if node[0] == "or":
        return [conj for p in parts for conj in p]
    out: list[list[tuple[Any, ...]]] = [[]]
    for p in parts:
        out = [a + b for a in out for b in p][:4096]
    return out


def _conj_ok(atoms: list[tuple[Any, ...]]) -> bool:
    by: dict[str, list[tuple[str, float]]] = {}
    for _c, metric, op, v in atoms:
        by.setdefault(metric, []).append((op, v))
    for cs in by.values():
        lo, lo_open, hi, hi_open = -math.inf, True, math.inf, True
        for op, v in cs:
            if op in (">", ">=", "==") and (v > lo or (v == lo and op == ">")):
                lo, lo_open = v, op == ">"
            if op in ("<", "<=", "==") and (v < hi or (v == hi and op == "<")):
                hi, hi_open = v, op == "<"
        if lo > hi or (lo == hi and (lo_open or hi_open or any(op == "!=" and v == lo for op, v in cs))):
            return False
    return True


def satisfiable(trigger: str) -> bool:
    """Whether some metric values make ``trigger`` hold (False for one that does not parse)."""
    p = parsed(trigger)
    return p is not None and any(_conj_ok(c) for c in _dnf(p.node))


#: metrics tried for a separating conjunct after the trigger's own (launch shape first: it decides splits)
_SEPARATORS = ("waves_per_sm", "grid_size", "achieved_occupancy_pct", "dram_pct", "tensor_pct", "sm_pct",
               "pct_floor", "arith_intensity", "registers_per_thread", "l2_hit_pct")


def narrowed_triggers(triggers: Sequence[str], helped: Sequence[dict[str, float]],
                      hurt: Sequence[dict[str, float]]) -> list[str] | None:
    """Each trigger that fired on a ``hurt`` trial, with one conjunct added that holds for every
    ``helped`` parent-metrics dict it fired on and fails for every ``hurt`` one; None when a trigger
    that fired where the change hurt cannot be narrowed that way (no helped point, no separating
    metric) or a result would not parse, be satisfiable or hold on the helped points."""
    out = []
    for t in triggers:
        p = parsed(t)
        a = [m for m in helped if p is not None and p.holds(m)]
        b = [m for m in hurt if p is not None and p.holds(m)]
        if not b:
            out.append(t)
            continue
        if not a:
            return None
        names = [*(p.metrics() if p else []), *_SEPARATORS, *sorted(set().union(*a, *b))]
        for metric in dict.fromkeys(names):
            if not all(metric in m for m in (*a, *b)):
                continue
            av, bv = [float(m[metric]) for m in a], [float(m[metric]) for m in b]
            if max(av) < min(bv):
                conj = f"{metric} < {(max(av) + min(bv)) / 2:.4g}"
            elif min(av) > max(bv):
                conj = f"{metric} > {(min(av) + max(bv)) / 2:.4g}"
            else:
                continue
            cand = f"({t}) and {conj}"
            q = parsed(cand)
            if q is not None and satisfiable(cand) and all(q.holds(m) for m in a) and not any(q.holds(m) for m in b):
                out.append(cand)
                break
        else:
            return None
    return out
