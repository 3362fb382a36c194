"""The results journal: every timed trial appended as it finishes, so a killed run keeps its timings.

``--kforge-json PATH`` is written once, at the end of the session.  A run killed before that (a
device call's time cap, an OOM kill, an xdist controller stopped with SIGTERM) would lose every
timing, including those of workers that had finished their trials.  So each process (one run or
every xdist worker) also appends each trial's result row, one JSON line, to ``PATH.partial.jsonl``
as soon as it is measured; a complete run removes the journal after writing ``PATH``.

Recover a killed run's results JSON (same schema, ``"partial": true``)::

    python -m pytest_kforge.journal runs/suite.json.partial.jsonl runs/suite.json
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .results import RunResults, TrialResult

__all__ = ["journal_path", "append", "recover", "main"]


def journal_path(json_path: str | Path) -> Path:
    """Where the journal of ``--kforge-json json_path`` lives."""
    return Path(f"{json_path}.partial.jsonl")


def append(json_path: str | Path, row: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
    """Append one result row (with the run's ``meta``: kernel, device, seed, started) as one line.

    One ``write`` on an ``O_APPEND`` descriptor, so lines of concurrent xdist workers do not interleave.
    """
    path = journal_path(json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"meta": dict(meta), "result": dict(row)}, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def recover(journal: str | Path) -> RunResults:
    """The results JSON of the rows in ``journal``, marked ``partial`` (a torn last line is skipped)."""
    results: list[TrialResult] = []
    meta: dict[str, Any] = {}
    for line in Path(journal).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a killed process was writing
        meta = meta or dict(rec.get("meta") or {})
        results.append(TrialResult.from_json(rec["result"]))
    run = RunResults.from_json({**meta, "results": []})
    run.results, run.partial = results, True
    return run


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pytest_kforge.journal JOURNAL.partial.jsonl OUT.json", file=sys.stderr)
        return 2
    src, out = Path(args[0]), Path(args[1])
    if not src.is_file():
        print(f"error: no journal at {src}; a run writes one next to its --kforge-json path", file=sys.stderr)
        return 2
    run = recover(src)
    from .fsutil import atomic_write_text

    atomic_write_text(out, json.dumps(run.to_json(), indent=2, default=str) + "\n")
    print(f"{out}: {len(run.results)} results recovered from {src}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
