"""The markdown shapes the contracts share: ``## `` blocks and ``### `` sections, tables, lists, numbers."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Self

from ._base import ContractError, _Contract


def _parse_num(text: str, field: str, *, optional: bool = False, unit: str = "") -> float | None:
    t = text.strip().rstrip("%").strip()
    factor = 1.0
    if unit and t.lower().endswith(unit):
        t = t[: -len(unit)].strip()
    elif unit and t.endswith("µs"):
        t = t[:-2].strip()
    elif unit == "us" and t.lower().endswith("ms"):  # an agent may write "1.21 ms"
        t, factor = t[:-2].strip(), 1000.0
    if optional and t.lower() in ("n/a", "-", "", "na", "none"):
        return None
    try:
        v = float(t) * factor
    except ValueError:
        raise ContractError(f"field `{field}` has {text.strip()!r}, which is not a number; write e.g. 12.5",
                            field) from None
    if not math.isfinite(v):
        raise ContractError(f"field `{field}` has {text.strip()!r}, which is not finite; write a number", field)
    return v


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(lines: list[str]) -> list[list[str]]:
    """Body rows of the first markdown table in ``lines`` (header and ``|---|`` separator skipped)."""
    rows: list[list[str]] = []
    seen = 0
    for ln in lines:
        s = ln.strip()
        if not s.startswith("|"):
            if seen:
                break
            continue
        seen += 1
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)[1:-1]]
        if seen == 1 or (seen == 2 and all(re.fullmatch(r":?-+:?", c) for c in cells)):
            continue  # header row and its |---| separator
        rows.append(cells)
    return rows


def _block(text: str, heading: str, what: str) -> list[str]:
    """The lines from the ``## <heading>`` line to the next ``## `` heading (or the end)."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip().startswith(f"## {heading}"):
            end = next((j for j in range(i + 1, len(lines)) if re.match(r"^\s*##\s", lines[j])), len(lines))
            return lines[i:end]
    raise ContractError(f"no `## {heading}` heading found in the text; a {what} starts with "
                        f"`## {heading} ...`", "heading")


def _heading(text: str, heading: str, what: str, pattern: str, shape: str,
             field: str) -> tuple[re.Match[str], dict[str, tuple[str, list[str]]]]:
    """The ``## <heading>`` block's first line matched against ``pattern``, and its ``###`` sections."""
    lines = _block(text, heading, what)
    m = re.match(pattern, lines[0])
    if not m:
        raise ContractError(f"the heading {lines[0].strip()!r} is not {shape}", field)
    return m, _sections(lines)


def _sections(lines: list[str]) -> dict[str, tuple[str, list[str]]]:
    """``### Title: rest`` sections -> {lower title: (rest of the heading line, body lines)}."""
    out: dict[str, tuple[str, list[str]]] = {}
    key = None
    for ln in lines[1:]:
        m = re.match(r"^\s*###\s+([^:]+?)\s*(?::\s*(.*))?$", ln)
        if m:
            key = m.group(1).strip().lower()
            out[key] = ((m.group(2) or "").strip(), [])
        elif key is not None:
            out[key][1].append(ln)
    return out


def _need(secs: dict[str, tuple[str, list[str]]], prefix: str, field: str, hint: str) -> tuple[str, list[str]]:
    for k, v in secs.items():
        if k.startswith(prefix):
            return v
    raise ContractError(f"the `### {hint}` section is missing (field `{field}`); add it as the workflow "
                        f"contract shows", field)


def _numbered(lines: list[str]) -> list[str]:
    return [m.group(1).strip() for ln in lines if (m := re.match(r"^\s*\d+[.)]\s+(.*)$", ln))]


def _bullets(lines: list[str]) -> list[str]:
    return [m.group(1).strip() for ln in lines if (m := re.match(r"^\s*[-*]\s+(.*)$", ln))]


def _row_cells(text: str, what: str, field: str) -> list[str]:
    rows = _table(["| header |", "|---|", text]) if text.strip().startswith("|") else []
    if len(rows) != 1:
        raise ContractError(f"{text.strip()!r} is not one markdown table row (`| a | b |`) of {what}", field)
    return rows[0]


def _unnumber(text: str) -> str:
    return re.sub(r"^\s*\d+[.)]\s+", "", text.strip())


def _enumerated(items: Iterable[Any]) -> list[str]:
    """``1. <item.render()>`` lines."""
    return [f"{i}. {x.render()}" for i, x in enumerate(items, 1)]


class _Row(_Contract):
    """A contract written as one markdown table row; ``_HEADER`` names its columns."""

    _HEADER: ClassVar[tuple[str, ...]]
    _WHAT: ClassVar[str]  # the table's name in messages, e.g. "Stages"
    _FIELD: ClassVar[str]  # the field of the enclosing contract that holds the rows

    def render(self) -> str:
        return "| " + " | ".join(_cell(c) for c in self._cells()) + " |"

    @classmethod
    def parse(cls, text: str) -> Self:
        """One ``| a | b | ... |`` row."""
        return cls.from_cells(_row_cells(text, f"the {cls._WHAT} table", cls._FIELD))

    @classmethod
    def from_cells(cls, cells: list[str]) -> Self:
        if len(cells) != len(cls._HEADER):
            raise ContractError(f"a {cls._WHAT} row (field `{cls._FIELD}`) has {len(cells)} cells, expected "
                                f"{len(cls._HEADER)} ({' | '.join(cls._HEADER)})", cls._FIELD)
        return cls._from_cells(cells)

    def _cells(self) -> list[str]:
        raise NotImplementedError

    @classmethod
    def _from_cells(cls, cells: list[str]) -> Self:
        return cls(*cells)


class _Item(_Contract):
    """A contract written as one list item (``1. a -- b -- c``); ``parse_item`` matches the class's ``_RE``."""

    _RE: ClassVar[re.Pattern[str]]
    _WHAT: ClassVar[str]  # what the error message calls an item, e.g. "trial"
    _SHAPE: ClassVar[str]  # the item's shape in the error message, e.g. "b=X, s=X, t=X -- why"
    _FIELD: ClassVar[str]  # the field of the enclosing contract that holds the items

    @classmethod
    def parse(cls, text: str) -> Self:
        """One item, numbered (``1. ...``) or not."""
        return cls.parse_item(_unnumber(text))

    @classmethod
    def parse_item(cls, text: str) -> Self:
        m = cls._RE.match(text.strip())
        if not m:
            raise ContractError(f"{cls._WHAT} {text.strip()!r} is not `{cls._SHAPE}`; rewrite it in that shape",
                                cls._FIELD)
        return cls._from_match(m)

    @classmethod
    def parse_items(cls, lines: Sequence[str]) -> list[Self]:
        """Every numbered item (``1. ...``) in ``lines``."""
        return [cls.parse_item(t) for t in _numbered(list(lines))]

    @classmethod
    def _from_match(cls, m: re.Match[str]) -> Self:
        raise NotImplementedError
