"""The small interface every agent backend implements, and the contract-retry rule.

``profiler.profile(kernel, version, trial, params, context=...) -> ProfileContract`` and
``designer.design(task, context=...) -> NewVersionSummary``.  Backends that talk (anthropic,
replay) get a reply text and parse it with :func:`ask_with_contract`: a reply that breaks the
contract gets ONE retry carrying the parse error, then :class:`AgentContractError` (the loop marks
the step failed and keeps the run state, so ``--resume`` can try again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ...errors import KforgeError
from .. import compat

__all__ = ["AgentContext", "Profiler", "Designer", "AgentContractError", "DesignImpossible", "AwaitingAgent",
           "ask_with_contract",
           "profile_prompt", "design_prompt", "clean", "expecting"]

T = TypeVar("T")


class AgentContractError(KforgeError):
    """An agent broke its output contract twice."""


class DesignImpossible(KforgeError):
    """The designer has no applicable change for this task (the iteration ends with this reason)."""


class AwaitingAgent(KforgeError):
    """The step is handed off (``--agents handoff``): the run stops here with the step ``waiting``.

    ``str(exc)`` is the paragraph saying what to write where; ``missing`` the one sentence saying what
    is not there yet (printed when ``--resume`` finds the step still waiting)."""

    def __init__(self, paragraph: str, missing: str) -> None:
        super().__init__(paragraph)
        self.missing = missing


@dataclasses.dataclass
class AgentContext:
    """What an agent may use besides its prompt; it fills ``exchange`` and ``usage`` as it goes."""

    root: Path
    kernels_dir: Path
    kernel: str
    step_key: str = ""
    language: str = ""
    matches: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    profiles: dict[str, Any] = dataclasses.field(default_factory=dict)  # trial -> ProfileContract
    results: dict[str, Any] | None = None  # latest suite results JSON
    runner: Any = None  # a suite.SuiteRunner (tools: run_suite, profile_version)
    knowledge: Any = None
    can_profile: bool = False  # a GPU and ncu are here: the profiler may run the profiling command
    reports_dir: Path | None = None
    run_dir: Path | None = None  # runs/<run-id>/ (tool outputs go there)
    timeout_s: float = 1800.0
    trials: tuple[str, ...] = ()  # the step's trial matrix (a profiler may measure them in one run)
    exchange: dict[str, Any] = dataclasses.field(default_factory=dict)
    usage: dict[str, int] = dataclasses.field(default_factory=dict)
    cost_usd: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)

    def add_usage(self, usage: dict[str, int], cost: float) -> None:
        for k, v in usage.items():
            self.usage[k] = self.usage.get(k, 0) + int(v or 0)
        self.cost_usd += cost


class Profiler(Protocol):
    name: str

    def profile(self, kernel: str, version: str, trial: str, params: dict[str, int], *,
                context: AgentContext) -> Any: ...


class Designer(Protocol):
    name: str

    def design(self, task: Any, *, context: AgentContext) -> Any: ...


def ask_with_contract(converse: Callable[[str], str], prompt: str, parse: Callable[[str], T], *,
                      agent: str, contract: str) -> T:
    """Send ``prompt``; parse the reply; on a contract error retry once with the error; then give up."""
    reply = converse(prompt)
    try:
        return parse(reply)
    except compat.contracts.ContractError as exc:
        first = str(exc)
    retry = (f"Your reply broke the {contract} contract: {first}. Reply again with the complete contract in "
             f"exactly the required markdown shape and nothing else.")
    reply = converse(retry)
    try:
        return parse(reply)
    except compat.contracts.ContractError as exc:
        raise AgentContractError(f"the {agent} agent broke the {contract} contract twice ({exc}); the run state "
                                 f"is kept: fix the agent or its prompt and rerun with --resume") from exc


def expecting(parse: Callable[[str], T], kernel: str, version: str) -> Callable[[str], T]:
    """``parse`` that also rejects a contract about another kernel or version (so it gets the retry)."""
    def checked(text: str) -> T:
        got = parse(text)
        if (getattr(got, "kernel", kernel), getattr(got, "version", version)) != (kernel, version):
            raise compat.contracts.ContractError(
                f"the contract is about {got.kernel} {got.version}, but {kernel} {version} was asked for; "  # type: ignore[attr-defined]
                f"reply about {kernel} {version}", "version")
        return got
    return checked


def clean(text: str) -> str:
    """One line without the contracts' separators (`` -- `` and ``;``), for text put into a contract."""
    return " ".join(str(text).replace("--", "-").replace(";", ",").split())


def profile_prompt(kernel: str, version: str, params: dict[str, int]) -> str:
    """The seed's profiler launch template."""
    return compat.contracts.profiler_launch_prompt(kernel, version, params)


def design_prompt(task: Any, language: str) -> str:
    """The seed's kernel-designer launch template followed by the rendered Optimization Task."""
    try:
        return compat.contracts.designer_launch_prompt(task, language)
    except compat.contracts.ContractError:  # a torch parent: no DSL skill to load
        opts = "; ".join(f"{o.name} ({o.rationale})" for o in task.optimizations)
        return (f"Create {task.kernel} {task.new_version} from {task.current}.\nLanguage: {language}.\n"
                f"Apply optimizations: [{opts}].\nReturn implementation summary per the output contract.\n\n"
                + task.render())
