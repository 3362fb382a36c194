"""The orchestrator's view of modules owned by other parts, with small stand-ins when absent.

Each stand-in is deliberately minimal and records that it is in use (``FALLBACKS``), so a run on a
partial checkout says so instead of silently behaving differently (contracts are always the real
``pytest_kforge.contracts``).  The real modules are:
``pytest_kforge.knowledge.KnowledgeBase``,
``pytest_kforge.trust.sandbox.run_isolated`` and ``pytest_kforge.trust.paths.PathGuard``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["contracts", "FALLBACKS", "make_knowledge_base", "run_isolated", "SandboxResult", "PathGuard",
           "PathRefused", "match_fields"]

FALLBACKS: list[str] = []

from pytest_kforge import contracts as _contracts

contracts: ModuleType = _contracts


class _NullKnowledgeBase:
    """No catalog: matches nothing, records updates in memory (so LEARN still reports what it would do)."""

    def __init__(self, root: str | Path = "docs/knowledge") -> None:
        self.root = Path(root)
        self.updates: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def entries(self) -> list[Any]:
        return []

    def match(self, metrics: dict[str, float], *, kernel_tags: tuple[str, ...] = (), language: str | None = None
              ) -> list[Any]:
        return []

    def __getattr__(self, name: str) -> Any:
        if name in ("add_entry", "add_evidence", "narrow_conditions", "to_anti_pattern"):
            def record(*args: Any, **kwargs: Any) -> None:
                self.updates.append((name, args, kwargs))
            return record
        raise AttributeError(name)


def make_knowledge_base(root: str | Path) -> Any:
    try:
        from pytest_kforge.knowledge import KnowledgeBase
    except ImportError:
        if "pytest_kforge.knowledge" not in FALLBACKS:
            FALLBACKS.append("pytest_kforge.knowledge")
        return _NullKnowledgeBase(root)
    return KnowledgeBase(root)


def match_fields(match: Any) -> dict[str, Any]:
    """Plain fields of a knowledge ``Match`` (its entry's name, path, kind, languages), tolerant of shape."""
    entry = getattr(match, "entry", match)
    name = getattr(entry, "name", None) or getattr(entry, "slug", None) or str(entry)
    path = getattr(entry, "path", None)
    meta = getattr(entry, "meta", None) or getattr(entry, "front_matter", None) or {}
    config = getattr(entry, "config", None) or (meta.get("config") if isinstance(meta, dict) else None) or {}
    return {
        "name": str(name),
        "title": str(getattr(entry, "title", name)),
        "path": str(path) if path is not None else "",
        "kind": str(getattr(entry, "kind", "optimization")),
        "languages": list(getattr(entry, "languages", ()) or ()),
        "est_gain_pct": float(getattr(match, "est_gain_pct", 0.0) or 0.0),
        "trigger": str(getattr(match, "trigger", "")),
        "condition": str(getattr(match, "condition", "")),
        "config": dict(config) if isinstance(config, dict) else {},
    }


@dataclasses.dataclass
class SandboxResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    crashed: bool
    reason: str | None
    gpu_ok: bool | None
    wall_s: float


def _run_isolated_fallback(cmd: list[str], *, timeout_s: float, cwd: str | Path, env: dict[str, str] | None = None,
                           check_gpu_after: bool = True) -> SandboxResult:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                           timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return SandboxResult(None, out, "", True, False, f"timed out after {timeout_s:g} s", None,
                             time.monotonic() - t0)
    crashed = p.returncode < 0
    reason = f"killed by signal {-p.returncode}" if crashed else None
    return SandboxResult(p.returncode, p.stdout, p.stderr, False, crashed, reason, None, time.monotonic() - t0)


try:
    from pytest_kforge.trust.sandbox import run_isolated
except ImportError:
    run_isolated = _run_isolated_fallback  # type: ignore[assignment]
    FALLBACKS.append("pytest_kforge.trust.sandbox")


class _PathRefusedFallback(ValueError):
    pass


class _PathGuardFallback:
    """Writes only inside ``allowed`` folders under ``root``; no ``..``, absolute paths or escaping links."""

    def __init__(self, root: str | Path, allowed: tuple[str, ...] = ("kernels/", "docs/")) -> None:
        self.root = Path(root).resolve()
        self.allowed = tuple(a.rstrip("/") for a in allowed)

    def resolve_for_write(self, rel_path: str | Path) -> Path:
        rel = Path(rel_path)
        if rel.is_absolute() or ".." in rel.parts:
            raise _PathRefusedFallback(f"{rel_path} is absolute or contains '..'; give a path relative to the "
                                       f"project inside {', '.join(self.allowed)}")
        target = (self.root / rel).resolve()
        for a in self.allowed:
            base = (self.root / a).resolve()
            if target == base or base in target.parents:
                return target
        raise _PathRefusedFallback(f"{rel_path} is outside the writable folders {', '.join(self.allowed)}; "
                                   f"write only there")


try:
    from pytest_kforge.trust.paths import PathGuard, PathRefused
except ImportError:
    PathGuard = _PathGuardFallback  # type: ignore[assignment,misc]
    PathRefused = _PathRefusedFallback  # type: ignore[assignment,misc]
    FALLBACKS.append("pytest_kforge.trust.paths")
