"""The devlog's current-best table, rendered from a suite results JSON (``--kforge-json``).

Only measured, correct rows count; the best version is listed first (ranked by the mean
percentage of the roofline floor over the trials it ran), so the orchestrator's ANALYZE step,
which takes the first version named in the ``best`` block, starts from it::

    python -m pytest_kforge.devlog best --from-json suite.json [--devlog docs/kernels/mla.md] \\
        [--command "pytest --kernel mla --kernel-version all --kforge-json suite.json"]

A suite split over several device calls (``scripts/h200.sh all VERSIONS=...``, one JSON per part)
is rendered from all its parts: ``--from-json part1.json part2.json.gz ...`` (gzipped ones as
stored under ``docs/kernels/runs/``); a version measured in
two parts is refused, so no row is silently picked from one of two runs.  A re-run of some versions after a fix
(run 24: v1_cute-v3_cute, after a host error) is named as such: ``--rerun rerun.json`` replaces those versions'
rows in the parts with its own, and says so.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import artifacts
from .fsutil import replace_marked_block

__all__ = ["best_rows", "render_best", "main"]


def best_rows(results: Iterable[Mapping[str, Any]], trials: Sequence[str] = ("decode", "spec")) -> list[dict[str, Any]]:
    """One row per version with each trial's median, TFLOP/s and % of floor, best first."""
    by_version: dict[str, dict[str, Any]] = {}
    for r in results:
        if not r.get("correct") or r.get("error") or r.get("median_us") is None:
            continue
        row = by_version.setdefault(r["version"], {"version": r["version"], "language": r.get("language", "")})
        row[r["trial"]] = {k: r.get(k) for k in ("median_us", "tflops", "pct_floor", "spread_pct", "id", "note")}
    rows = list(by_version.values())

    def score(row: dict[str, Any]) -> float:
        pcts = [row[t]["pct_floor"] for t in trials if t in row and row[t].get("pct_floor")]
        return statistics.fmean(pcts) * len(pcts) / len(trials) if pcts else 0.0

    return sorted(rows, key=score, reverse=True)


def _cell(row: Mapping[str, Any], trial: str, key: str, fmt: str) -> str:
    v = row.get(trial, {}).get(key)
    return "-" if v is None else fmt.format(v)


def render_best(rows: Sequence[Mapping[str, Any]], *, gpu: str | None, command: str, date: str = "") -> str:
    head = ("| Version | DSL | decode us | spec us | decode TFLOP/s | spec TFLOP/s | decode % floor | spec % floor |\n"
            "|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['version']} | {r.get('language', '')} | {_cell(r, 'decode', 'median_us', '{:.1f}')} | "
            f"{_cell(r, 'spec', 'median_us', '{:.1f}')} | {_cell(r, 'decode', 'tflops', '{:.0f}')} | "
            f"{_cell(r, 'spec', 'tflops', '{:.0f}')} | {_cell(r, 'decode', 'pct_floor', '{:.1f}')} | "
            f"{_cell(r, 'spec', 'pct_floor', '{:.1f}')} |")
    notes = sorted({r[t]["note"] for r in rows for t in ("decode", "spec") if t in r and r[t].get("note")})
    tail = [f"Measured on {gpu or 'an unknown GPU'}{(' on ' + date) if date else ''} with the project's harness "
            f"(CUDA-event median, L2 flushed before every round; floors at 4.3 TB/s and 790 TFLOP/s): `{command}`."]
    tail += [f"Note: {n}" for n in notes]
    return "\n".join(lines) + "\n\n" + "\n".join(tail)


def _load(path: Path) -> dict[str, Any] | str:
    """A results JSON (gzipped or not), or one sentence saying why it cannot be read."""
    try:
        raw = artifacts.read_bytes(path)  # loose, or packed in a run archive (the README's artifact policy)
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)  # gzip by its magic
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object with 'results'")
    except (OSError, ValueError, EOFError, zlib.error) as exc:
        return f"devlog: cannot read {path}: {exc}; pass a file written by --kforge-json"
    return data


def _versions(data: Mapping[str, Any]) -> list[str]:
    return sorted({r.get("version") for r in data.get("results", [])} - {None})


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.devlog")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("best", help="rewrite the devlog's current-best table from a results JSON")
    b.add_argument("--from-json", required=True, type=Path, nargs="+",
                   help="--kforge-json results files (the parts of one suite run)")
    b.add_argument("--rerun", type=Path, nargs="+", default=[],
                   help="results of versions run again after a fix: their rows replace those versions' rows in "
                        "the parts")
    b.add_argument("--devlog", type=Path, help="write the `best` block of this devlog (else print)")
    b.add_argument("--command", default="pytest --kernel mla --kernel-version all", help="the command that measured it")
    args = ap.parse_args(argv)
    loaded: list[tuple[Path, dict[str, Any]]] = []
    for path in [*args.from_json, *args.rerun]:
        data = _load(path)
        if isinstance(data, str):
            print(data, file=sys.stderr)
            return 2
        loaded.append((path, data))
    parts, reruns = loaded[:len(args.from_json)], loaded[len(args.from_json):]
    for group, what in ((parts, "pass the parts of one run, each version in one of them"),
                        (reruns, "give each version's re-run once")):
        seen: dict[str, Path] = {}  # version -> the file it came from
        for path, data in group:
            for v in _versions(data):
                if v in seen and seen[v] != path:
                    print(f"devlog: version {v} is in both {seen[v]} and {path}; {what}", file=sys.stderr)
                    return 2
                seen[v] = path
    results = [r for _, d in parts for r in d.get("results", [])]
    in_parts = {r.get("version") for r in results}
    notes = []
    for path, data in reruns:
        redone = _versions(data)
        results = [r for r in results if r.get("version") not in redone] + list(data.get("results", []))
        print(f"devlog: {', '.join(redone) or 'no version'} from the re-run {path} (their rows in the parts "
              "left out)", file=sys.stderr)
        stray = [v for v in redone if v not in in_parts]
        if stray:
            print(f"devlog: warning: {', '.join(stray)} of the re-run {path} are in none of the parts: is it the "
                  "re-run of this run?", file=sys.stderr)
        if redone:
            notes.append(f"Note: {', '.join(redone)} from a re-run ({path.name}, started "
                         f"{str(data.get('started') or '?')[:16]}), in place of their rows in the parts.")
    every = [d for _, d in loaded]
    gpus = sorted({str(d.get("gpu")) for d in every if d.get("gpu")})
    dates = sorted(str(d.get("started", ""))[:10] for d in every if d.get("started"))
    text = render_best(best_rows(results), gpu=" / ".join(gpus) or None, command=args.command,
                       date=dates[0] if dates else "")
    text = "\n".join([text, *notes])
    if args.devlog:
        replace_marked_block(args.devlog, "best", text, heading="## Current best")
        print(f"devlog: wrote the current-best table of {args.devlog}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
