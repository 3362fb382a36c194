"""Kernel designer -> orchestrator: :class:`NewVersionSummary` (``## New Version: mla v2``)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar, Self

from ._base import ContractError, _Contract, _ident, _int, _line, _no_sep
from ._md import _bullets, _enumerated, _heading, _Item, _need

__all__ = ["TrialCheck", "NewVersionSummary"]


@dataclasses.dataclass
class TrialCheck(_Item):
    """``1. b=32, s=16, t=4096 -- why this point matters``."""

    b: int
    s: int
    t: int
    why: str

    _RE = re.compile(r"^\[?\(?\s*(?:b=)?(\d+),\s*(?:s=)?(\d+),\s*(?:t=)?(\d+)\s*\)?\]?\s+--\s+(.+)$")
    _WHAT, _SHAPE, _FIELD = "trial", "b=X, s=X, t=X -- why", "trials"

    def __post_init__(self) -> None:
        for f in ("b", "s", "t"):
            _int(getattr(self, f), f)
        self.why = _line(self.why, "why")
        if not self.why:
            raise ContractError("trial field `why` is empty; say why this point matters", "why")

    def render(self) -> str:
        return f"b={self.b}, s={self.s}, t={self.t} -- {self.why}"

    @classmethod
    def _from_match(cls, m: re.Match[str]) -> Self:
        return cls(int(m[1]), int(m[2]), int(m[3]), m[4])


def _paths(value: Any, field: str) -> list[str]:
    if not isinstance(value, list):
        raise ContractError(f"field `{field}` must be a list of paths", field)
    out = [_line(p, field) for p in value]
    for p in out:
        if not p or " " in p or "," in p or ";" in p:
            raise ContractError(f"field `{field}` has path {p!r}; paths must be non-empty without spaces, "
                                f"commas or semicolons", field)
    return out


@dataclasses.dataclass
class NewVersionSummary(_Contract):
    """Designer -> orchestrator: what was built, whether it is correct, where it is logged."""

    kernel: str
    version: str
    changes: list[str]
    files_created: list[str]
    files_modified: list[str]
    correctness: str
    trials: list[TrialCheck]
    devlog_path: str

    _nested: ClassVar[dict[str, type]] = {"trials": TrialCheck}

    def __post_init__(self) -> None:
        self.kernel, self.version = _ident(self.kernel, "kernel"), _ident(self.version, "version")
        if not isinstance(self.changes, list) or not self.changes:
            raise ContractError("field `changes` must be a non-empty list of applied changes", "changes")
        self.changes = [_no_sep(_line(c, "changes"), "changes", (";",)) for c in self.changes]
        if not all(self.changes):
            raise ContractError("field `changes` has an empty item; describe each change", "changes")
        self.files_created = _paths(self.files_created, "files_created")
        self.files_modified = _paths(self.files_modified, "files_modified")
        c = _line(self.correctness, "correctness").upper()
        if c not in ("PASS", "FAIL"):
            raise ContractError(f"field `correctness` is {self.correctness!r}; it must be PASS or FAIL", "correctness")
        self.correctness = c
        self.devlog_path = _paths([self.devlog_path], "devlog_path")[0]

    def render(self) -> str:
        def ps(xs: list[str]) -> str:
            return ", ".join(xs) or "none"
        return "\n".join([
            f"## New Version: {self.kernel} {self.version}",
            f"### Changes Applied: {'; '.join(self.changes)}",
            f"### Files: Created: {ps(self.files_created)}; Modified: {ps(self.files_modified)}",
            f"### Correctness: {self.correctness}", "", "### Trial Configurations Checked",
            *_enumerated(self.trials),
            "", f"### Devlog Entry Written: {self.devlog_path}"]) + "\n"

    @classmethod
    def parse(cls, text: str) -> NewVersionSummary:
        m, secs = _heading(text, "New Version:", "designer summary", r"^\s*## New Version:\s*(\S+)\s+(\S+)\s*$",
                           "`## New Version: <kernel> <version>`", "version")
        head, body = _need(secs, "changes applied", "changes", "Changes Applied: ...")
        changes = [c.strip() for c in head.split(";") if c.strip()] if head else _bullets(body)
        fhead, _ = _need(secs, "files", "files_created", "Files: Created: ...; Modified: ...")
        fm = re.match(r"^Created:?\s*(.*?);\s*Modified:?\s*(.*)$", fhead, re.I)
        if not fm:
            raise ContractError(f"the Files line {fhead!r} is not `Created: a, b; Modified: c` (fields "
                                f"files_created, files_modified); write 'none' for an empty list", "files_created")

        def split(s: str) -> list[str]:
            return [] if s.strip().lower() in ("", "none", "-") else [p.strip() for p in s.split(",") if p.strip()]
        corr, _ = _need(secs, "correctness", "correctness", "Correctness: PASS|FAIL")
        trials = TrialCheck.parse_items(_need(secs, "trial configurations", "trials", "Trial Configurations Checked")[1])
        devlog, _ = _need(secs, "devlog entry", "devlog_path", "Devlog Entry Written: <path>")
        return cls(m[1], m[2], changes, split(fm[1]), split(fm[2]), corr, trials, devlog)
