"""Profiler -> orchestrator: :class:`ProfileContract` (``## Profile: mla v1 | b=32, s=1, t=4096``) and its rows."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Self

from ._base import ContractError, _Contract, _fmt, _ident, _int, _line, _no_sep, _not_numbered, _num
from ._md import _enumerated, _heading, _Item, _need, _parse_num, _Row, _table

__all__ = ["StageRow", "Opportunity", "BaselineRow", "ProfileContract", "BOTTLENECKS"]

BOTTLENECKS = ("Memory", "Compute", "Latency")
_PARAM_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def _root_cause(line: str) -> str | None:
    """The text of a ``Root cause: ...`` line (also ``- **Root cause:** ...``), else None."""
    s = line.strip()
    s = s[2:].lstrip() if s.startswith("- ") else s
    bold = s.startswith("**")
    s = s[2:] if bold else s
    if not s.lower().startswith("root cause"):
        return None
    s = s[len("root cause"):]
    s = s[2:] if bold and s.startswith("**") else s
    if not s.startswith(":"):
        return None
    s = s[1:].strip()
    return s[2:].strip() if bold and s.startswith("**") else s


def _parse_params(text: str, field: str) -> dict[str, int]:
    params: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.strip().strip("[]()").split(","))):
        m = re.fullmatch(r"([a-z][a-z0-9_]*)\s*=\s*(\d+)", part)
        if not m:
            raise ContractError(f"field `{field}` has {part!r}, which is not `name=integer`; write e.g. "
                                f"`b=32, s=1, t=4096`", field)
        params[m.group(1)] = int(m.group(2))
    if not params:
        raise ContractError(f"field `{field}` is empty; write the trial point as `b=32, s=1, t=4096`", field)
    return params


@dataclasses.dataclass
class StageRow(_Row):
    """One kernel launch (stage) of a version: ``| split-kv | 61.2 us | 55 | 71 | 12 | Compute | ... |``."""

    stage: str
    duration_us: float
    tc_pct: float | None
    dram_pct: float | None
    occ_pct: float | None
    bottleneck: str
    key_issue: str

    _HEADER = ("Stage", "Duration", "TC%", "DRAM%", "Occ%", "Bottleneck", "Key Issue")
    _WHAT, _FIELD = "Stages", "stages"

    def __post_init__(self) -> None:
        self.stage = _line(self.stage, "stage")
        if not self.stage:
            raise ContractError("field `stage` is empty; name the kernel launch, e.g. 'splitkv'", "stage")
        self.duration_us = _num(self.duration_us, "duration_us")  # type: ignore[assignment]
        for f in ("tc_pct", "dram_pct", "occ_pct"):
            setattr(self, f, _num(getattr(self, f), f, optional=True))
        self.bottleneck = _line(self.bottleneck, "bottleneck")
        self.key_issue = _line(self.key_issue, "key_issue")

    def _cells(self) -> list[str]:
        return [self.stage, f"{_fmt(self.duration_us)} us", _fmt(self.tc_pct), _fmt(self.dram_pct),
                _fmt(self.occ_pct), self.bottleneck, self.key_issue]

    @classmethod
    def _from_cells(cls, cells: list[str]) -> Self:
        return cls(cells[0], _parse_num(cells[1], "duration_us", unit="us"),  # type: ignore[arg-type]
                   _parse_num(cells[2], "tc_pct", optional=True), _parse_num(cells[3], "dram_pct", optional=True),
                   _parse_num(cells[4], "occ_pct", optional=True), cells[5], cells[6])


@dataclasses.dataclass
class Opportunity(_Item):
    """``1. split-kv -- est. 25% gain -- trigger: achieved_occupancy_pct=12 -- entry: <knowledge path>``."""

    name: str
    est_gain_pct: float
    trigger: str
    entry: str = ""

    _RE: ClassVar[re.Pattern[str]] = re.compile(
        r"^(?P<name>.+?) -- est\.\s*(?P<gain>[^%\s]+)\s*% gain -- trigger:\s*(?P<trigger>.+?)"
        r"(?: -- (?:entry|knowledge):\s*(?P<entry>.+))?$")
    _WHAT, _SHAPE, _FIELD = "opportunity", "name -- est. X% gain -- trigger: metric=value", "opportunities"

    def __post_init__(self) -> None:
        self.name = _not_numbered(_no_sep(_line(self.name, "name"), "name"), "name")
        self.est_gain_pct = _num(self.est_gain_pct, "est_gain_pct")  # type: ignore[assignment]
        self.trigger = _no_sep(_line(self.trigger, "trigger"), "trigger")
        self.entry = _no_sep(_line(self.entry, "entry"), "entry")
        for f in ("name", "trigger"):
            if not getattr(self, f):
                raise ContractError(f"opportunity field `{f}` is empty; fill it in", f)

    def render(self) -> str:
        s = f"{self.name} -- est. {_fmt(self.est_gain_pct)}% gain -- trigger: {self.trigger}"
        return s + (f" -- entry: {self.entry}" if self.entry else "")

    @classmethod
    def _from_match(cls, m: re.Match[str]) -> Self:
        return cls(m["name"], _parse_num(m["gain"], "est_gain_pct"), m["trigger"], m["entry"] or "")  # type: ignore[arg-type]


@dataclasses.dataclass
class BaselineRow(_Row):
    """``| duration_us | 123.4 | 61.2 | -50.4% |`` (values as text, so units may be kept)."""

    metric: str
    previous: str
    current: str
    change: str

    _HEADER = ("Metric", "Previous", "Current", "Change")
    _WHAT, _FIELD = "vs Baseline", "baseline"

    def __post_init__(self) -> None:
        for f in ("metric", "previous", "current", "change"):
            setattr(self, f, _line(getattr(self, f), f))
        if not self.metric:
            raise ContractError("baseline field `metric` is empty; name the metric, e.g. duration_us", "metric")

    @classmethod
    def from_values(cls, metric: str, previous: float, current: float, unit: str = "") -> BaselineRow:
        """Build a row with the change as a signed percentage of ``previous``."""
        change = f"{(current - previous) / previous * 100:+.1f}%" if previous else "n/a"
        u = f" {unit}" if unit else ""
        return cls(metric, f"{previous:.4g}{u}", f"{current:.4g}{u}", change)

    def _cells(self) -> list[str]:
        return [self.metric, self.previous, self.current, self.change]


@dataclasses.dataclass
class ProfileContract(_Contract):
    """Profiler -> orchestrator: the compact profile summary."""

    kernel: str
    version: str
    params: dict[str, int]
    stages: list[StageRow]
    bottleneck: str
    root_cause: str
    opportunities: list[Opportunity] = dataclasses.field(default_factory=list)
    baseline: list[BaselineRow] = dataclasses.field(default_factory=list)

    _nested: ClassVar[dict[str, type]] = {"stages": StageRow, "opportunities": Opportunity, "baseline": BaselineRow}

    def __post_init__(self) -> None:
        self.kernel, self.version = _ident(self.kernel, "kernel"), _ident(self.version, "version")
        if not isinstance(self.params, dict) or not self.params:
            raise ContractError("field `params` must be a non-empty dict like {'b': 32, 's': 1, 't': 4096}", "params")
        for k, v in self.params.items():
            if not isinstance(k, str) or not _PARAM_RE.match(k):
                raise ContractError(f"params key {k!r} is not a lower-case name; use b, s, t, h", "params")
            _int(v, "params")
        b = _line(self.bottleneck, "bottleneck").removesuffix("-bound").removesuffix(" bound").strip()
        match = [x for x in BOTTLENECKS if x.lower() == b.lower()]
        if not match:
            raise ContractError(f"field `bottleneck` is {self.bottleneck!r}; it must be one of "
                                f"{', '.join(BOTTLENECKS)}", "bottleneck")
        self.bottleneck = match[0]
        self.root_cause = _line(self.root_cause, "root_cause")
        if not self.root_cause:
            raise ContractError("field `root_cause` is empty; explain the bottleneck in two sentences", "root_cause")
        if not self.stages:
            raise ContractError("field `stages` is empty; list at least one kernel launch", "stages")

    def render(self) -> str:
        p = ", ".join(f"{k}={v}" for k, v in self.params.items())
        out = [f"## Profile: {self.kernel} {self.version} | {p}", "### Stages",
               "| Stage | Duration | TC% | DRAM% | Occ% | Bottleneck | Key Issue |",
               "|-------|----------|-----|-------|------|------------|-----------|",
               *(s.render() for s in self.stages),
               f"### Bottleneck: {self.bottleneck}-bound", f"Root cause: {self.root_cause}",
               "### Top 3 Opportunities (ranked by estimated impact)",
               *_enumerated(self.opportunities)]
        if self.baseline:
            out += ["", "### vs Baseline (if applicable)", "| Metric | Previous | Current | Change |",
                    "|--------|----------|---------|--------|", *(r.render() for r in self.baseline)]
        return "\n".join(out) + "\n"

    @classmethod
    def parse(cls, text: str) -> ProfileContract:
        m, secs = _heading(text, "Profile:", "profile summary", r"^\s*## Profile:\s*(\S+)\s+(\S+)\s*\|\s*(.*)$",
                           "`## Profile: <kernel> <version> | b=X, s=X, t=X` (fields kernel, version, params)",
                           "kernel")
        stages = [StageRow.from_cells(r) for r in _table(_need(secs, "stages", "stages", "Stages")[1])]
        head, body = _need(secs, "bottleneck", "bottleneck", "Bottleneck: <Memory|Compute|Latency>-bound")
        rc = next((r for r in map(_root_cause, body) if r is not None), None)
        if rc is None:
            raise ContractError("the `Root cause: ...` line under `### Bottleneck` is missing (field "
                                "`root_cause`); add two sentences", "root_cause")
        opps = Opportunity.parse_items(
            _need(secs, "top", "opportunities", "Top 3 Opportunities (ranked by estimated impact)")[1])
        base = next((v for k, v in secs.items() if k.startswith("vs baseline")), None)
        rows = [BaselineRow.from_cells(cells) for cells in (_table(base[1]) if base else [])]
        return cls(m[1], m[2], _parse_params(m[3], "params"), stages, head, rc, opps, rows)
