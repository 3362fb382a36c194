"""The run's writes outside its folder, copied into it so the folder alone carries the run's results.

A run writes the devlog (perf block, version entries), knowledge files and profile reports in the
project, and a designer writes version files.  When the run is on a lent GPU machine and only the
run folder comes back, those writes would be lost; so every invocation fingerprints ``docs/``,
``reports/<kernel>/`` and ``kernels/<kernel>/`` when it starts, and when it ends copies the files it
changed into ``runs/<id>/outside/<path>`` and lists them in ``outside.json``.  Bring them home with
``cp -r runs/<id>/outside/. .`` from the project root.  ``outside/`` holds the last invocation's
writes only (it is emptied first), so copying it never puts back a file an earlier invocation
wrote and someone has edited since.  ``outside/`` is transport: a committed copy
of the run leaves it out.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from pathlib import Path

from ..fsutil import atomic_write_text
from .agents.allowlist import diff_trees, tree_snapshot

__all__ = ["OutsideWrites"]


class OutsideWrites:
    def __init__(self, root: Path, kernel: str, kernels_dir: Path | None = None) -> None:
        self.root = Path(root).resolve()
        kdir = Path(kernels_dir or self.root / "kernels").resolve() / kernel
        # agents/: LEARN's new knowledge entries re-sync the optimisation catalog (agents/skills/.../SKILL.md)
        self.watch = [p for p in (self.root / "docs", self.root / "reports" / kernel, kdir, self.root / "agents")
                      if p.is_relative_to(self.root)]
        self.before = self._snap()

    def _snap(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for w in self.watch:
            if w.is_dir():
                rel = w.relative_to(self.root).as_posix()
                out.update({f"{rel}/{k}": v for k, v in tree_snapshot(w).items()})
        return out

    def mirror(self, run_dir: Path) -> list[str]:
        """Copy what changed since the start into ``run_dir/outside/``; returns the paths (deleted ones too)."""
        dest = run_dir / "outside"
        shutil.rmtree(dest, ignore_errors=True)
        ch = diff_trees(self.before, self._snap())
        ch.created = [p for p in ch.created if not (self.root / p).resolve().is_relative_to(run_dir.resolve())]
        ch.modified = [p for p in ch.modified if not (self.root / p).resolve().is_relative_to(run_dir.resolve())]
        if not ch.all:
            return []
        for p in [*ch.created, *ch.modified]:
            (dest / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.root / p, dest / p)
        log = run_dir / "outside.json"
        entries = json.loads(log.read_text(encoding="utf-8")) if log.exists() else []
        entries.append({"at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                        "written": [*ch.created, *ch.modified], "deleted": ch.deleted})
        atomic_write_text(log, json.dumps(entries, indent=1) + "\n")
        return ch.all
