"""The three agent contracts of the optimisation cycle, as dataclasses that render and parse markdown.

* :class:`ProfileContract` -- profiler -> orchestrator (``## Profile: mla v1 | b=32, s=1, t=4096``)
* :class:`OptimizationTask` -- orchestrator -> kernel designer (``## Optimization Task: mla v1 -> v2``)
* :class:`NewVersionSummary` -- kernel designer -> orchestrator (``## New Version: mla v2``)

``render()`` writes the workflow's markdown shape; ``parse(text)`` reads it back (it finds the
contract's ``## `` heading anywhere in an agent's reply) and raises :class:`ContractError`, whose
one-sentence message and ``field`` attribute name what is missing or invalid.  ``to_dict()`` and
``from_dict()`` give the JSON form.  Text fields are one line each: constructors collapse runs of
whitespace, so ``parse(x.render()) == x`` for every valid ``x``.  Numbers render in their shortest
exact form (producers round before constructing if they want short tables).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar, TypeVar

from .errors import KforgeError

__all__ = [
    "ContractError", "StageRow", "Opportunity", "BaselineRow", "ProfileContract", "PlannedOptimization",
    "Constraints", "OptimizationTask", "TrialCheck", "NewVersionSummary", "BOTTLENECKS",
    "profiler_launch_prompt", "designer_launch_prompt",
]

BOTTLENECKS = ("Memory", "Compute", "Latency")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
_PARAM_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SEP = " -- "
T = TypeVar("T")


class ContractError(KforgeError, ValueError):
    """A contract is malformed; ``field`` names the offending field."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


# ---------------------------------------------------------------------------------- helpers
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


def _row_cells(text: str, what: str, field: str) -> list[str]:
    rows = _table(["| header |", "|---|", text]) if text.strip().startswith("|") else []
    if len(rows) != 1:
        raise ContractError(f"{text.strip()!r} is not one markdown table row (`| a | b |`) of {what}", field)
    return rows[0]


def _unnumber(text: str) -> str:
    return re.sub(r"^\s*\d+[.)]\s+", "", text.strip())


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


# ---------------------------------------------------------------------------------- profiler
@dataclasses.dataclass
class StageRow(_Contract):
    """One kernel launch (stage) of a version: ``| split-kv | 61.2 us | 55 | 71 | 12 | Compute | ... |``."""

    stage: str
    duration_us: float
    tc_pct: float | None
    dram_pct: float | None
    occ_pct: float | None
    bottleneck: str
    key_issue: str

    def __post_init__(self) -> None:
        self.stage = _line(self.stage, "stage")
        if not self.stage:
            raise ContractError("field `stage` is empty; name the kernel launch, e.g. 'splitkv'", "stage")
        self.duration_us = _num(self.duration_us, "duration_us")  # type: ignore[assignment]
        for f in ("tc_pct", "dram_pct", "occ_pct"):
            setattr(self, f, _num(getattr(self, f), f, optional=True))
        self.bottleneck = _line(self.bottleneck, "bottleneck")
        self.key_issue = _line(self.key_issue, "key_issue")

    def render(self) -> str:
        cells = [self.stage, f"{_fmt(self.duration_us)} us", _fmt(self.tc_pct), _fmt(self.dram_pct),
                 _fmt(self.occ_pct), self.bottleneck, self.key_issue]
        return "| " + " | ".join(_cell(c) for c in cells) + " |"

    @classmethod
    def parse(cls, text: str) -> StageRow:
        """One ``| Stage | Duration | ... |`` row."""
        return cls.from_cells(_row_cells(text, "the Stages table", "stages"))

    @classmethod
    def from_cells(cls, cells: list[str]) -> StageRow:
        if len(cells) != 7:
            raise ContractError(f"a Stages row (field `stages`) has {len(cells)} cells, expected 7 (Stage | Duration | TC% | "
                                f"DRAM% | Occ% | Bottleneck | Key Issue)", "stages")
        return cls(cells[0], _parse_num(cells[1], "duration_us", unit="us"),  # type: ignore[arg-type]
                   _parse_num(cells[2], "tc_pct", optional=True), _parse_num(cells[3], "dram_pct", optional=True),
                   _parse_num(cells[4], "occ_pct", optional=True), cells[5], cells[6])


@dataclasses.dataclass
class Opportunity(_Contract):
    """``1. split-kv -- est. 25% gain -- trigger: achieved_occupancy_pct=12 -- entry: <knowledge path>``."""

    name: str
    est_gain_pct: float
    trigger: str
    entry: str = ""

    _RE: ClassVar[re.Pattern[str]] = re.compile(
        r"^(?P<name>.+?) -- est\.\s*(?P<gain>[^%\s]+)\s*% gain -- trigger:\s*(?P<trigger>.+?)"
        r"(?: -- (?:entry|knowledge):\s*(?P<entry>.+))?$")

    def __post_init__(self) -> None:
        self.name = _no_sep(_line(self.name, "name"), "name")
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
    def parse(cls, text: str) -> Opportunity:
        """One opportunity line, numbered (``1. ...``) or not."""
        return cls.parse_item(_unnumber(text))

    @classmethod
    def parse_item(cls, text: str) -> Opportunity:
        m = cls._RE.match(text.strip())
        if not m:
            raise ContractError(f"opportunity {text.strip()!r} is not `name -- est. X% gain -- trigger: "
                                f"metric=value`; rewrite it in that shape", "opportunities")
        return cls(m["name"], _parse_num(m["gain"], "est_gain_pct"), m["trigger"], m["entry"] or "")  # type: ignore[arg-type]


@dataclasses.dataclass
class BaselineRow(_Contract):
    """``| duration_us | 123.4 | 61.2 | -50.4% |`` (values as text, so units may be kept)."""

    metric: str
    previous: str
    current: str
    change: str

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

    def render(self) -> str:
        return "| " + " | ".join(_cell(c) for c in (self.metric, self.previous, self.current, self.change)) + " |"

    @classmethod
    def parse(cls, text: str) -> BaselineRow:
        """One ``| Metric | Previous | Current | Change |`` row."""
        cells = _row_cells(text, "the vs Baseline table", "baseline")
        if len(cells) != 4:
            raise ContractError(f"a vs Baseline row (field `baseline`) has {len(cells)} cells, expected 4 (Metric | "
                                f"Previous | Current | Change)", "baseline")
        return cls(*cells)


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
               *(f"{i}. {o.render()}" for i, o in enumerate(self.opportunities, 1))]
        if self.baseline:
            out += ["", "### vs Baseline (if applicable)", "| Metric | Previous | Current | Change |",
                    "|--------|----------|---------|--------|", *(r.render() for r in self.baseline)]
        return "\n".join(out) + "\n"

    @classmethod
    def parse(cls, text: str) -> ProfileContract:
        lines = _block(text, "Profile:", "profile summary")
        m = re.match(r"^\s*## Profile:\s*(\S+)\s+(\S+)\s*\|\s*(.*)$", lines[0])
        if not m:
            raise ContractError(f"the heading {lines[0].strip()!r} is not `## Profile: <kernel> <version> | "
                                f"b=X, s=X, t=X` (fields kernel, version, params)", "kernel")
        secs = _sections(lines)
        stages = [StageRow.from_cells(r) for r in _table(_need(secs, "stages", "stages", "Stages")[1])]
        head, body = _need(secs, "bottleneck", "bottleneck", "Bottleneck: <Memory|Compute|Latency>-bound")
        rc = next((r for r in map(_root_cause, body) if r is not None), None)
        if rc is None:
            raise ContractError("the `Root cause: ...` line under `### Bottleneck` is missing (field "
                                "`root_cause`); add two sentences", "root_cause")
        opps = [Opportunity.parse_item(t) for t in _numbered(_need(
            secs, "top", "opportunities", "Top 3 Opportunities (ranked by estimated impact)")[1])]
        base = next((v for k, v in secs.items() if k.startswith("vs baseline")), None)
        rows = []
        for cells in _table(base[1]) if base else []:
            if len(cells) != 4:
                raise ContractError(f"a vs Baseline row (field `baseline`) has {len(cells)} cells, expected 4 (Metric | Previous | "
                                    f"Current | Change)", "baseline")
            rows.append(BaselineRow(*cells))
        return cls(m[1], m[2], _parse_params(m[3], "params"), stages, head, rc, opps, rows)


# ---------------------------------------------------------------------------------- orchestrator
@dataclasses.dataclass
class PlannedOptimization(_Contract):
    """``1. fold s into M -- why -- knowledge: docs/knowledge/optimizations/x.md`` (link may be empty)."""

    name: str
    rationale: str
    knowledge_link: str = ""

    def __post_init__(self) -> None:
        self.name = _no_sep(_line(self.name, "name"), "name")
        self.rationale = _no_sep(_line(self.rationale, "rationale"), "rationale")
        self.knowledge_link = _no_sep(_line(self.knowledge_link, "knowledge_link"), "knowledge_link")
        if self.knowledge_link.lower() == "none":
            self.knowledge_link = ""
        if not self.name or not self.rationale:
            raise ContractError("optimisation `name` and `rationale` must both be filled in", "name" if not
                                self.name else "rationale")

    def render(self) -> str:
        return f"{self.name} -- {self.rationale} -- knowledge: {self.knowledge_link or 'none'}"

    @classmethod
    def parse(cls, text: str) -> PlannedOptimization:
        return cls.parse_item(_unnumber(text))

    @classmethod
    def parse_item(cls, text: str) -> PlannedOptimization:
        m = re.match(r"^(.+?) -- (.+?)(?: -- (?:knowledge:\s*)?(.*))?$", text.strip())
        if not m:
            raise ContractError(f"optimisation {text.strip()!r} is not `name -- rationale -- knowledge: <path>`; "
                                f"rewrite it in that shape", "optimizations")
        return cls(m[1], m[2], m[3] or "")


@dataclasses.dataclass
class Constraints(_Contract):
    """The designer's limits, each one line of text (e.g. ``"<= 168 regs/thread (2 consumer WGs)"``)."""

    register_budget: str
    target_occupancy: str
    control_level: str
    language_constraints: str

    LABELS: ClassVar[dict[str, str]] = {"register_budget": "Register budget", "target_occupancy": "Target occupancy",
                                        "control_level": "Control level",
                                        "language_constraints": "Language constraints"}

    def __post_init__(self) -> None:
        for f in self.LABELS:
            setattr(self, f, _line(getattr(self, f), f))

    def render(self) -> str:
        return "\n".join(f"- {label}: {getattr(self, f)}" for f, label in self.LABELS.items())

    @classmethod
    def parse(cls, text: str) -> Constraints:
        """The four ``- Label: value`` lines."""
        return cls.parse_lines(text.splitlines())

    @classmethod
    def parse_lines(cls, lines: list[str]) -> Constraints:
        found = {}
        for item in _bullets(lines):
            label, _, value = item.partition(":")
            found[label.strip().lower()] = value.strip()
        kw = {}
        for f, label in cls.LABELS.items():
            if label.lower() not in found:
                raise ContractError(f"the Constraints list has no `- {label}: ...` line (field `{f}`); add it "
                                    f"(write 'none' if there is no limit)", f)
            kw[f] = found[label.lower()]
        return cls(**kw)


@dataclasses.dataclass
class OptimizationTask(_Contract):
    """Orchestrator -> designer: what to build next and within which limits."""

    kernel: str
    current: str
    new_version: str
    bottleneck: str
    optimizations: list[PlannedOptimization]
    constraints: Constraints

    _nested: ClassVar[dict[str, type]] = {"optimizations": PlannedOptimization, "constraints": Constraints}

    def __post_init__(self) -> None:
        self.kernel = _ident(self.kernel, "kernel")
        self.current, self.new_version = _ident(self.current, "current"), _ident(self.new_version, "new_version")
        self.bottleneck = _line(self.bottleneck, "bottleneck")
        if not self.bottleneck:
            raise ContractError("field `bottleneck` is empty; copy it from the profile summary", "bottleneck")
        if not self.optimizations:
            raise ContractError("field `optimizations` is empty; list at least one optimisation", "optimizations")

    def render(self) -> str:
        return "\n".join([
            f"## Optimization Task: {self.kernel} {self.current} -> {self.new_version}",
            f"### Current Bottleneck: {self.bottleneck}", "### Optimizations to Apply:",
            *(f"{i}. {o.render()}" for i, o in enumerate(self.optimizations, 1)),
            "", "### Constraints", self.constraints.render()]) + "\n"

    @classmethod
    def parse(cls, text: str) -> OptimizationTask:
        lines = _block(text, "Optimization Task:", "designer instruction")
        m = re.match(r"^\s*## Optimization Task:\s*(\S+)\s+(\S+)\s*->\s*(\S+)\s*$", lines[0])
        if not m:
            raise ContractError(f"the heading {lines[0].strip()!r} is not `## Optimization Task: <kernel> "
                                f"<current> -> <new_version>`", "new_version")
        secs = _sections(lines)
        head, _ = _need(secs, "current bottleneck", "bottleneck", "Current Bottleneck: ...")
        opts = [PlannedOptimization.parse_item(t) for t in
                _numbered(_need(secs, "optimizations", "optimizations", "Optimizations to Apply:")[1])]
        cons = Constraints.parse_lines(_need(secs, "constraints", "constraints", "Constraints")[1])
        return cls(m[1], m[2], m[3], head, opts, cons)


# ---------------------------------------------------------------------------------- designer
@dataclasses.dataclass
class TrialCheck(_Contract):
    """``1. b=32, s=16, t=4096 -- why this point matters``."""

    b: int
    s: int
    t: int
    why: str

    def __post_init__(self) -> None:
        for f in ("b", "s", "t"):
            _int(getattr(self, f), f)
        self.why = _line(self.why, "why")
        if not self.why:
            raise ContractError("trial field `why` is empty; say why this point matters", "why")

    def render(self) -> str:
        return f"b={self.b}, s={self.s}, t={self.t} -- {self.why}"

    @classmethod
    def parse(cls, text: str) -> TrialCheck:
        return cls.parse_item(_unnumber(text))

    @classmethod
    def parse_item(cls, text: str) -> TrialCheck:
        m = re.match(r"^\[?\(?\s*(?:b=)?(\d+),\s*(?:s=)?(\d+),\s*(?:t=)?(\d+)\s*\)?\]?\s+--\s+(.+)$", text.strip())
        if not m:
            raise ContractError(f"trial {text.strip()!r} is not `b=X, s=X, t=X -- why`; rewrite it in that shape",
                                "trials")
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
            *(f"{i}. {t.render()}" for i, t in enumerate(self.trials, 1)),
            "", f"### Devlog Entry Written: {self.devlog_path}"]) + "\n"

    @classmethod
    def parse(cls, text: str) -> NewVersionSummary:
        lines = _block(text, "New Version:", "designer summary")
        m = re.match(r"^\s*## New Version:\s*(\S+)\s+(\S+)\s*$", lines[0])
        if not m:
            raise ContractError(f"the heading {lines[0].strip()!r} is not `## New Version: <kernel> <version>`",
                                "version")
        secs = _sections(lines)
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
        trials = [TrialCheck.parse_item(t) for t in
                  _numbered(_need(secs, "trial configurations", "trials", "Trial Configurations Checked")[1])]
        devlog, _ = _need(secs, "devlog entry", "devlog_path", "Devlog Entry Written: <path>")
        return cls(m[1], m[2], changes, split(fm[1]), split(fm[2]), corr, trials, devlog)


# ---------------------------------------------------------------------------------- launch prompts
def profiler_launch_prompt(kernel: str, version: str, params: dict[str, int]) -> str:
    """The workflow's task prompt for the profiler agent."""
    p = ", ".join(f"{k}={v}" for k, v in params.items())
    return (f"Profile {kernel} {version} at {p}.\nReturn compact summary per the output contract.\n"
            f"Update the devlog performance section in docs/kernels/{kernel}.md.")


def designer_launch_prompt(task: OptimizationTask, language: str) -> str:
    """The workflow's task prompt for the kernel-designer agent, followed by the full instruction contract."""
    if language not in ("cutile-dsl", "cute-dsl"):
        raise ContractError(f"language {language!r} is not cutile-dsl or cute-dsl; pick one of those", "language")
    opts = "; ".join(f"{o.name} ({o.rationale})" for o in task.optimizations)
    return (f"Create {task.kernel} {task.new_version} from {task.current}.\nLanguage: {language}.\n"
            f"Load /design-{language}-kernel and the matching reference skill if one exists.\n"
            f"Apply optimizations: [{opts}].\nReturn implementation summary per the output contract.\n\n"
            + task.render())
