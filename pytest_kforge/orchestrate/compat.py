"""The orchestrator's view of the modules it uses from other parts of the package.

The sandbox and the path guard come from :mod:`pytest_kforge.trust`; the knowledge base gets a
recorded stand-in only when it cannot be imported (``FALLBACKS`` says so in the run log), so a
LEARN step on a broken checkout reports what it would have written instead of failing.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_kforge import contracts as _contracts

__all__ = ["contracts", "FALLBACKS", "make_knowledge_base", "run_isolated", "SandboxResult", "PathGuard",
           "PathRefused", "match_fields"]

FALLBACKS: list[str] = []

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
        if name in ("add_entry", "add_evidence", "narrow_conditions", "to_anti_pattern", "add_pitfall"):
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


from pytest_kforge.trust.paths import PathGuard, PathRefused  # noqa: E402
from pytest_kforge.trust.sandbox import SandboxResult, run_isolated  # noqa: E402
