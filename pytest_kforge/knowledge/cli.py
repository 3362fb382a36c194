"""``python -m pytest_kforge.knowledge validate|sync|list|match k=v ...``: the knowledge base's command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ._md import _fmt_gain
from .base import KnowledgeBase
from .entry import LANGS

__all__ = ["main"]

_DESCRIPTION = "The knowledge base: optimisation and anti-pattern entries, their catalog, and the LEARN-step updates."


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_kforge.knowledge validate|sync|list|match dram_pct=83 ... [--tags mla]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.knowledge", description=_DESCRIPTION)
    ap.add_argument("--root", default="docs/knowledge", help="knowledge folder (default docs/knowledge)")
    ap.add_argument("--catalog", default=None, help="catalog file (default: the optimization-catalog skill)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="list every problem; exit 1 if there is one")
    sub.add_parser("sync", help="regenerate the catalog rows from the entries")
    sub.add_parser("list", help="one line per entry")
    mp = sub.add_parser("match", help="entries whose triggers hold for the given metrics, best first")
    mp.add_argument("metrics", nargs="+", help="short_name=value, e.g. dram_pct=83.1")
    mp.add_argument("--tags", default="", help="comma-separated kernel contexts, e.g. mla,online-softmax")
    mp.add_argument("--language", default=None, choices=LANGS)
    a = ap.parse_args(argv)
    kb = KnowledgeBase(a.root, catalog=a.catalog)
    if a.cmd == "validate":
        probs = kb.validate()
        print("\n".join(probs) if probs else f"ok: {len(kb.entries())} entries, catalog {kb.catalog}")
        return 1 if probs else 0
    if a.cmd == "sync":
        kb.sync_catalog()
        print(f"catalog rewritten: {kb.catalog}")
        return 0
    if a.cmd == "list":
        for e in kb.entries():
            print(f"{e.name:40s} {e.kind:13s} {e.scope:11s} est {_fmt_gain(e.est_gain)}%  {e.rel}")
        return 0
    metrics: dict[str, float] = {}
    for item in a.metrics:
        k, _, v = item.partition("=")
        try:
            metrics[k.strip()] = float(v)
        except ValueError:
            print(f"ERROR: {item!r} is not name=number; write e.g. dram_pct=83.1", file=sys.stderr)
            return 2
    tags = tuple(t.strip() for t in a.tags.split(",") if t.strip())
    for m in kb.match(metrics, kernel_tags=tags, language=a.language):
        print(f"{m.entry.name} -- est. {_fmt_gain(m.est_gain_pct)}% gain -- trigger: {m.trigger} -- entry: "
              f"{(kb.root / m.entry.rel).as_posix()}")
    return 0
