"""The knowledge base: optimisation and anti-pattern entries, their catalog, and the LEARN-step updates.

Layout under ``root`` (``docs/knowledge``)::

    optimizations/<name>.md                      anti-patterns/<name>.md           (shared knowledge)
    languages/<lang>/optimizations/<name>.md     languages/<lang>/anti-patterns/<name>.md

Each entry is YAML front matter (``name, kind, scope, applies_to, languages, triggers, est_gain,
evidence``) plus the workflow's template sections.  The catalog -- one row per entry, in an
optimisation table and an anti-pattern table -- is the ``optimization-catalog`` skill
(``agents/skills/optimization-catalog/SKILL.md``, found by walking up from ``root``; ``CATALOG.md``
in ``root`` when there is no such skill).  The machine-owned parts of a file sit between
``<!-- kforge:KEY:start/end -->`` markers; every update rewrites only those and the front matter,
under a lock (``<root>/.kforge-kb.lock``), atomically, so human text elsewhere survives.

Triggers are a tiny safe language over the profiler's metric short names (no ``eval``)::

    dram_pct > 70            achieved_occupancy_pct < 25 and tensor_pct < 40      (a or b) and c

An entry matches when any one of its triggers holds; a trigger naming a metric that was not
measured does not hold.  ``python -m pytest_kforge.knowledge validate|sync|match k=v ...`` is the CLI.

Modules: :mod:`.triggers` (the trigger language), :mod:`.entry` (one entry: parse, validate, render),
:mod:`.catalog` (catalog rows), :mod:`.base` (:class:`KnowledgeBase`: queries and LEARN updates),
:mod:`.cli` (the command line); every name is importable from ``pytest_kforge.knowledge`` itself.
"""

from __future__ import annotations

from .base import KnowledgeBase, Match
from .catalog import catalog_row
from .cli import main
from .entry import KINDS, LANGS, SCOPES, SECTIONS, Entry, EvidenceRow, render_entry
from .triggers import METRIC_NAMES, KnowledgeError, Trigger, TriggerError, parse_trigger

__all__ = ["KnowledgeBase", "Entry", "Match", "EvidenceRow", "KnowledgeError", "TriggerError", "parse_trigger",
           "METRIC_NAMES", "SECTIONS", "KINDS", "SCOPES", "LANGS", "Trigger", "catalog_row", "render_entry", "main"]
