"""Triggers: a tiny safe language over the profiler's metric short names (no ``eval``).

::

    dram_pct > 70            achieved_occupancy_pct < 25 and tensor_pct < 40      (a or b) and c

A trigger naming a metric that was not measured does not hold.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ..errors import KforgeError

__all__ = ["KnowledgeError", "TriggerError", "Trigger", "parse_trigger", "METRIC_NAMES"]

_BRIEF_METRICS = ("duration_us", "dram_pct", "sm_pct", "tensor_pct", "achieved_occupancy_pct",
                  "theoretical_occupancy_pct", "registers_per_thread", "shared_mem_per_block_kb",
                  "local_spill_bytes", "l2_hit_pct", "dram_read_mb", "dram_write_mb",
                  "pct_floor", "arith_intensity", "num_launches")


def _metric_names() -> frozenset[str]:
    try:  # the profiler's table adds its extra rule inputs (mem_pct, grid_size, ...) and derived quantities
        from ..profile.metrics import DERIVED_METRICS, METRICS
        return frozenset(_BRIEF_METRICS) | frozenset(METRICS) | frozenset(DERIVED_METRICS)
    except ImportError:  # pragma: no cover - partial checkout
        return frozenset(_BRIEF_METRICS)


METRIC_NAMES: frozenset[str] = _metric_names()


class KnowledgeError(KforgeError, ValueError):
    """A bad knowledge-base request (unknown entry, duplicate name, malformed entry)."""


class TriggerError(KnowledgeError):
    """A trigger that is not ``metric op number`` joined by and/or."""


_TOKEN = re.compile(r"\s*(?:(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<op><=|>=|==|!=|<|>)|"
                    r"(?P<par>[()])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")
_OPS = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__, "==": float.__eq__,
        "!=": float.__ne__}
_HOW = "write triggers as `metric op number` (op one of < <= > >= == !=) joined by and/or"


@dataclasses.dataclass(frozen=True)
class Trigger:
    """A parsed trigger: ``("cmp", metric, op, value)`` or ``("and"|"or", [children])`` in ``node``."""

    text: str
    node: tuple[Any, ...]

    def holds(self, metrics: Mapping[str, float]) -> bool:
        def ev(n: tuple[Any, ...]) -> bool:
            if n[0] == "cmp":
                v = metrics.get(n[1])
                return v is not None and _OPS[n[2]](float(v), n[3])
            parts = (ev(c) for c in n[1])
            return all(parts) if n[0] == "and" else any(parts)
        return ev(self.node)

    def metrics(self) -> list[str]:
        out: list[str] = []

        def walk(n: tuple[Any, ...]) -> None:
            if n[0] == "cmp":
                out.append(n[1]) if n[1] not in out else None
            else:
                for c in n[1]:
                    walk(c)
        walk(self.node)
        return out

    def describe(self, metrics: Mapping[str, float]) -> str:
        """``dram_pct=83.1, tensor_pct=12`` -- the measured values the trigger looked at."""
        # two decimals, trailing zeros dropped: 216.6172 KB reads 216.62 (4 significant digits lost the 0.0172)
        return ", ".join(f"{m}={f'{float(metrics[m]):.2f}'.rstrip('0').rstrip('.')}" for m in self.metrics()
                         if m in metrics)


def parse_trigger(text: str) -> Trigger:
    """Parse one trigger; raises :class:`TriggerError` with the position of the problem."""
    if not isinstance(text, str) or not text.strip():
        raise TriggerError(f"trigger {text!r} is empty; {_HOW}")
    toks: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise TriggerError(f"trigger {text!r} has an unexpected character at position {pos} "
                               f"({text[pos:pos + 8]!r}); {_HOW}")
        kind = m.lastgroup or ""
        val, start = m.group(kind), m.start(kind)
        if kind == "word" and val.lower() in ("and", "or"):
            kind, val = val.lower(), val.lower()
        toks.append((kind, val, start))
        pos = m.end()
    i = 0

    def peek() -> tuple[str, str, int]:
        return toks[i] if i < len(toks) else ("end", "", len(text))

    def fail(want: str) -> TriggerError:
        k, v, p = peek()
        got = "the end" if k == "end" else repr(v)
        return TriggerError(f"trigger {text!r}: expected {want} at position {p} but found {got}; {_HOW}")

    def expr(level: str) -> tuple[Any, ...]:
        nonlocal i
        sub = (lambda: expr("and")) if level == "or" else atom
        items = [sub()]
        while peek()[0] == level:
            i += 1
            items.append(sub())
        return items[0] if len(items) == 1 else (level, items)

    def atom() -> tuple[Any, ...]:
        nonlocal i
        k, v, _ = peek()
        if k == "par" and v == "(":
            i += 1
            node = expr("or")
            if peek()[1] != ")":
                raise fail("')'")
            i += 1
            return node
        if k != "word":
            raise fail("a metric name")
        if v not in METRIC_NAMES:
            raise TriggerError(f"trigger {text!r} names unknown metric {v!r}; known metrics are "
                               f"{', '.join(sorted(METRIC_NAMES))}")
        i += 1
        if peek()[0] != "op":
            raise fail("a comparison operator")
        op = peek()[1]
        i += 1
        if peek()[0] != "num":
            raise fail("a number")
        num = float(peek()[1])
        i += 1
        return ("cmp", v, op, num)

    node = expr("or")
    if i != len(toks):
        raise fail("'and', 'or' or the end")
    return Trigger(text.strip(), node)
