"""The catalog: one generated table row per entry, in an optimisation and an anti-pattern table.

The catalog file is the ``optimization-catalog`` skill (``agents/skills/optimization-catalog/SKILL.md``,
found by walking up from the knowledge root), or ``CATALOG.md`` in the root when there is no such skill.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._md import _fmt_gain
from .entry import SCOPES, Entry, _rel_path

__all__ = ["catalog_row"]

# no File column: an entry's place follows from its name, kind and scope (entry._rel_path), and the skill's body
# must stay under ~20000 characters, so the catalog says the rule once instead of repeating a path per row
_CAT_HEAD = ("| Name | Title | Scope | Languages | Applies to | Triggers (any) | Est. gain | Evidence |\n"
             "|------|-------|-------|-----------|------------|----------------|-----------|----------|")
_CAT_KEY = {"optimization": "catalog-optimizations", "anti-pattern": "catalog-anti-patterns"}
_CAT_HEADING = {"optimization": "## Optimizations", "anti-pattern": "## Anti-patterns"}


def catalog_row(e: Entry) -> str:
    cells = [e.name, e.title, e.scope, ", ".join(e.languages), ", ".join(e.applies_to),
             "; ".join(f"`{t}`" for t in e.triggers), f"{_fmt_gain(e.est_gain)}%", e.evidence]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _row_name(row: str) -> str:
    cells = re.split(r"(?<!\\)\|", row.strip())
    return cells[1].strip() if len(cells) > 2 else ""


def _row_file(row: str, kind: str) -> str:
    """The file a row of the ``kind`` table stands for: its name and scope decide where it lives."""
    cells = re.split(r"(?<!\\)\|", row.strip())
    scope = cells[3].strip() if len(cells) > 4 else ""
    return _rel_path(_row_name(row), kind, scope if scope in SCOPES else "shared")


def _scope_key(row: str) -> tuple[int, str]:
    cells = re.split(r"(?<!\\)\|", row.strip())
    scope = cells[3].strip() if len(cells) > 4 else ""
    return (SCOPES.index(scope) if scope in SCOPES else 9, _row_name(row))


def _table_rows(block: str | None) -> list[str]:
    rows = [ln.strip() for ln in (block or "").splitlines() if ln.strip().startswith("|")]
    return [r for r in rows[1:] if not re.fullmatch(r"\|[\s:|-]*\|", r)]


def _default_catalog(root: Path) -> Path:
    for d in [root, *root.resolve().parents]:
        cand = d / "agents" / "skills" / "optimization-catalog" / "SKILL.md"
        if cand.exists():
            return cand
    return root / "CATALOG.md"


_CAT_SKELETON = ("# Optimization catalog\n\nOne row per knowledge entry; the rows are generated from the entries' front "
                 "matter.\n")
