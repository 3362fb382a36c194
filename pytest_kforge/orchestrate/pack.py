"""``--pack <run-id> --pack-to <folder>``: a run folder made small enough to commit, and still replayable.

JSON files (``state.json``, ``exchanges/*.json``, ``verify-*.json``, ``analyze-*-results.json``) are
gzipped byte-deterministically; ``summary.md``, ``trajectory.png`` and ``plan.txt`` stay as they are
(readable on the forge); ``tasks/`` (the prompts, whose text is in the state's DESIGN outputs too)
and ``outside/`` (transport of the run's writes into the project) are left out.  The replay backend
and ``RunState.load`` read the gzipped files directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import KforgeError
from ..fsutil import atomic_write_gz_text

__all__ = ["pack_run", "KEEP_AS_IS"]

KEEP_AS_IS = ("summary.md", "trajectory.png", "plan.txt")


def pack_run(src: Path, dest: Path) -> list[Path]:
    """Copy run folder ``src`` into ``dest`` packed; returns the files written."""
    src, dest = Path(src), Path(dest)
    if not (src / "state.json").exists():
        raise KforgeError(f"{src} has no state.json; pass a run folder (runs/<id>) to --pack")
    if dest.resolve() == src.resolve():
        raise KforgeError("--pack-to must be another folder than the run itself (e.g. docs/kernels/runs/<id>)")
    written: list[Path] = []
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if not p.is_file() or rel.parts[0] in ("tasks", "outside"):
            continue
        if p.suffix == ".json":
            written.append(atomic_write_gz_text(dest / rel.with_name(rel.name + ".gz"), p.read_text(encoding="utf-8")))
        elif p.name in KEEP_AS_IS:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest / rel)
            written.append(dest / rel)
    return written
