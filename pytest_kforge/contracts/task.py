"""Orchestrator -> kernel designer: :class:`OptimizationTask` (``## Optimization Task: mla v1 -> v2``)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Self

from ._base import ContractError, _Contract, _ident, _line, _no_sep, _not_numbered
from ._md import _bullets, _enumerated, _heading, _Item, _need

__all__ = ["PlannedOptimization", "Constraints", "OptimizationTask"]


@dataclasses.dataclass
class PlannedOptimization(_Item):
    """``1. fold s into M -- why -- knowledge: docs/knowledge/optimizations/x.md`` (link may be empty)."""

    name: str
    rationale: str
    knowledge_link: str = ""

    _RE = re.compile(r"^(.+?) -- (.+?)(?: -- (?:knowledge:\s*)?(.*))?$")
    _WHAT, _SHAPE, _FIELD = "optimisation", "name -- rationale -- knowledge: <path>", "optimizations"

    def __post_init__(self) -> None:
        self.name = _not_numbered(_no_sep(_line(self.name, "name"), "name"), "name")
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
    def _from_match(cls, m: re.Match[str]) -> Self:
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
            *_enumerated(self.optimizations),
            "", "### Constraints", self.constraints.render()]) + "\n"

    @classmethod
    def parse(cls, text: str) -> OptimizationTask:
        m, secs = _heading(text, "Optimization Task:", "designer instruction",
                           r"^\s*## Optimization Task:\s*(\S+)\s+(\S+)\s*->\s*(\S+)\s*$",
                           "`## Optimization Task: <kernel> <current> -> <new_version>`", "new_version")
        head, _ = _need(secs, "current bottleneck", "bottleneck", "Current Bottleneck: ...")
        opts = PlannedOptimization.parse_items(_need(secs, "optimizations", "optimizations", "Optimizations to Apply:")[1])
        cons = Constraints.parse_lines(_need(secs, "constraints", "constraints", "Constraints")[1])
        return cls(m[1], m[2], m[3], head, opts, cons)
