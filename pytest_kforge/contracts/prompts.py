"""The workflow's task prompts that launch the profiler and kernel-designer agents."""

from __future__ import annotations

from ._base import ContractError
from .task import OptimizationTask

__all__ = ["profiler_launch_prompt", "designer_launch_prompt"]


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
            f"Apply optimizations: [{opts}].\nReturn implementation summary per the output contract.\n"
            # LEARN credits only the optimisations the summary names, so the names must match the task's
            f"Under Changes Applied, name each optimization you applied exactly as written above.\n\n"
            + task.render())
