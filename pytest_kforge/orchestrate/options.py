"""The orchestrator's run options (what ``python -m pytest_kforge.orchestrate`` parses into one object).

Its own module so :mod:`.loop` (the driver) and :mod:`.steps` (the step bodies) both import it
without importing each other.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .evaluate import parse_goal

__all__ = ["Options"]


@dataclasses.dataclass
class Options:
    kernel: str
    root: Path = Path(".")
    kernels_dir: Path | None = None
    runs_dir: Path | None = None
    from_version: str | None = None
    iterations: int = 2
    agents: str = "offline"
    goals: list[str] = dataclasses.field(default_factory=list)
    dry_run: bool = False
    timeout_s: float = 1800.0
    autotune_budget_s: float = 3600.0
    model: str | None = None
    results: str | None = None
    lock_timeout_s: float = 10.0
    agent_cmd: str | None = None  # --agents command: the coding-agent CLI for both roles
    designer_cmd: str | None = None  # per-role overrides (any backend)
    profiler_cmd: str | None = None
    agent_timeout_s: float = 3600.0  # one agent command's time limit
    suite_args: list[str] = dataclasses.field(default_factory=list)  # extra harness args of VERIFY's suite

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        # relative folders are the root's (a stored run names them so, to stay relocatable)
        self.kernels_dir = (self.root / (self.kernels_dir or "kernels")).resolve()
        self.runs_dir = (self.root / (self.runs_dir or "runs")).resolve()
        for g in self.goals:
            parse_goal(g)

    def to_json(self) -> dict[str, Any]:
        """JSON of the options with folders inside the root relative to it, so a copied run folder
        resumes under another ``--root`` (``--resume`` takes root and runs dir from the command line)."""
        def rel(v: Path) -> str:
            return v.relative_to(self.root).as_posix() if v.is_relative_to(self.root) else str(v)
        d = {k: (rel(v) if isinstance(v, Path) and k != "root" else v) for k, v in dataclasses.asdict(self).items()}
        d["root"] = str(self.root)  # for the reader only: --resume uses its own --root
        return d
