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

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.kernels_dir = Path(self.kernels_dir or self.root / "kernels").resolve()
        self.runs_dir = Path(self.runs_dir or self.root / "runs").resolve()
        for g in self.goals:
            parse_goal(g)

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}
