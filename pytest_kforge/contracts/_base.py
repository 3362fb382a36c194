"""What every contract shares: :class:`ContractError`, field checks, number formatting, JSON form."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar, TypeVar

from ..errors import KforgeError

_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
_PARAM_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SEP = " -- "
T = TypeVar("T")


class ContractError(KforgeError, ValueError):
    """A contract is malformed; ``field`` names the offending field."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _line(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise ContractError(f"field `{field}` must be a string, got {type(value).__name__}; pass text", field)
    return " ".join(value.split())


def _ident(value: Any, field: str) -> str:
    text = _line(value, field)
    if not _NAME_RE.match(text):
        raise ContractError(f"field `{field}` is {value!r}, which is not a name (letters, digits, _ . + -); "
                            f"use e.g. 'mla' or 'v2'", field)
    return text


def _no_sep(text: str, field: str, seps: tuple[str, ...] = (_SEP.strip(),)) -> str:
    for sep in seps:
        if sep in text:
            raise ContractError(f"field `{field}` contains {sep!r}, which the markdown form uses as a separator; "
                                f"reword it without {sep!r}", field)
    return text


_LIST_NUMBER_RE = re.compile(r"^\d+[.)](?:\s|$)")


def _not_numbered(text: str, field: str) -> str:
    """``text``, refused when it starts like a list item's own number (``1.`` / ``2)``): an item is parsed with its
    number stripped, so such a field would lose its start."""
    if _LIST_NUMBER_RE.match(text):
        raise ContractError(f"field `{field}` starts with {text.split()[0]!r}, which reads as the list's own number; "
                            "reword its start", field)
    return text


def _num(value: Any, field: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ContractError(f"field `{field}` must be a finite number, got {value!r}; pass e.g. 12.5", field)
    return float(value)


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContractError(f"field `{field}` must be a non-negative integer, got {value!r}", field)
    return value


def _fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    return str(int(x)) if x == int(x) and abs(x) < 1e15 else repr(x)


class _Contract:
    """to_dict/from_dict shared by every contract dataclass (nested lists of dataclasses included)."""

    _nested: ClassVar[dict[str, type]] = {}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        if not isinstance(data, dict):
            raise ContractError(f"{cls.__name__}.from_dict needs a dict, got {type(data).__name__}", "")
        kwargs: dict[str, Any] = {}
        nested: dict[str, type] = getattr(cls, "_nested", {})
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                    continue
                raise ContractError(f"{cls.__name__} data has no `{f.name}` key; it needs "
                                    f"{', '.join(x.name for x in dataclasses.fields(cls))}", f.name)  # type: ignore[arg-type]
            value = data[f.name]
            sub = nested.get(f.name)
            if sub is not None and isinstance(value, list):
                value = [sub.from_dict(v) for v in value]  # type: ignore[attr-defined]
            elif sub is not None and value is not None:
                value = sub.from_dict(value)  # type: ignore[attr-defined]
            kwargs[f.name] = value
        return cls(**kwargs)
