"""The best record and the devlog's current-best table, from the results JSONs of one run (``--kforge-json``).

``best`` computes the record (:mod:`pytest_kforge.best`: the rule, the ranking, per-trial and overall best),
writes it as JSON (``--best-json``, e.g. ``docs/kernels/mla/best.json``) and renders the devlog's ``best``
block from it; ``render`` re-renders the block from a record alone::

    python -m pytest_kforge.devlog best --from-json suite.json --best-json docs/kernels/mla/best.json \\
        --devlog docs/kernels/mla.md [--command "pytest --kernel mla --kernel-version all --kforge-json suite.json"]
    python -m pytest_kforge.devlog render --best-json docs/kernels/mla/best.json --devlog docs/kernels/mla.md

A suite split over several device calls (``scripts/h200.sh all VERSIONS=...``, one JSON per part)
is computed from all its parts: ``--from-json part1.json part2.json.gz ...`` (gzipped ones as
stored under ``docs/kernels/runs/``); a version measured in
two parts is refused, so no row is silently picked from one of two runs.  A re-run of some versions after a fix
(run 24: v1_cute-v3_cute, after a host error) is named as such: ``--rerun rerun.json`` replaces those versions'
rows in the parts with its own, and says so.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .best import BestRecord, compute, load_best
from .fsutil import replace_marked_block
from .results import ResultsError, RunResults, TrialResult, load_results

__all__ = ["render_best", "main"]


def _ceilings(record: BestRecord) -> str:
    """The record's floor ceilings in words; records written before calibration used the H200 default."""
    from .spec import Roofline

    d = Roofline()
    roof = record.roofline or {"tbs": d.bandwidth_bytes_per_s / 1e12, "tflops": d.flops_per_s / 1e12}
    return f"{roof['tbs']:.3g} TB/s and {roof['tflops']:.0f} TFLOP/s"


def _cell(row: Mapping[str, Any], trial: str, key: str, fmt: str) -> str:
    v = row["trials"].get(trial, {}).get(key)
    return "-" if v is None else fmt.format(v)


def render_best(record: BestRecord) -> str:
    """The devlog's current-best table: the record's rows in its order, the rule and where they were measured."""
    trials = record.trials
    cols = [f"{t} us" for t in trials] + [" + ".join(trials) + " us"] + [f"{t} TFLOP/s" for t in trials] + \
        [f"{t} % floor" for t in trials]
    lines = ["| Version | DSL | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for r in record.rows:
        cells = [_cell(r, t, "median_us", "{:.1f}") for t in trials]
        cells.append("-" if r["score_us"] is None else f"{r['score_us']:.1f}")
        cells += [_cell(r, t, "tflops", "{:.0f}") for t in trials] + [_cell(r, t, "pct_floor", "{:.1f}") for t in trials]
        lines.append(f"| {r['version']} | {r.get('language', '')} | " + " | ".join(cells) + " |")
    per = ", ".join(f"{t} {c['version']} ({c['median_us']:.1f} us)" for t, c in record.per_trial.items())
    tail = [f"Best: **{record.best or 'none (no version measured on every trial)'}**; per trial: {per or 'none'}. "
            f"Rule ({record.criterion}): {record.rule}",
            f"Measured on {record.gpu or 'an unknown GPU'}{(' on ' + record.date) if record.date else ''} with the "
            f"project's harness (CUDA-event median, L2 flushed before every round; floors at {_ceilings(record)}): "
            f"`{record.command}`."]
    notes = sorted({c["note"] for r in record.rows for c in r["trials"].values() if c.get("note")})
    tail += [f"Note: {n}" for n in notes]
    tail += [f"Note: {line}" for line in record.reruns]
    return "\n".join(lines) + "\n\n" + "\n".join(tail)


def _relative(path: Path) -> str:
    """``path`` relative to the working directory when under it (what a record stores), else as given."""
    try:
        return os.path.relpath(path.resolve(), Path.cwd()) if path.resolve().is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


def _write(record: BestRecord, best_json: Path | None, devlog: Path | None) -> None:
    if best_json is not None:
        record.write(best_json)
        print(f"devlog: wrote the best record {best_json} (best: {record.best})")
    text = render_best(record)
    if devlog is not None:
        replace_marked_block(devlog, "best", text, heading="## Current best")
        print(f"devlog: wrote the current-best table of {devlog}")
    elif best_json is None:
        print(text)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.devlog")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("best", help="compute the best record from a run's results JSONs and render the devlog table")
    b.add_argument("--from-json", required=True, type=Path, nargs="+",
                   help="--kforge-json results files (the parts of one suite run)")
    b.add_argument("--rerun", type=Path, nargs="+", default=[],
                   help="results of versions run again after a fix: their rows replace those versions' rows in "
                        "the parts")
    b.add_argument("--trials", default="decode,spec", help="the default trials the rule ranks over (decode,spec)")
    b.add_argument("--best-json", type=Path, help="write the best record here (docs/kernels/<kernel>/best.json)")
    b.add_argument("--devlog", type=Path, help="write the `best` block of this devlog (else print)")
    b.add_argument("--command", default="pytest --kernel mla --kernel-version all", help="the command that measured it")
    r = sub.add_parser("render", help="re-render the devlog's current-best table from a best record")
    r.add_argument("--best-json", required=True, type=Path, help="the best record (docs/kernels/<kernel>/best.json)")
    r.add_argument("--devlog", type=Path, help="write the `best` block of this devlog (else print)")
    args = ap.parse_args(argv)
    if args.cmd == "render":
        try:
            record = load_best(args.best_json)
        except ResultsError as exc:
            print(f"devlog: {exc}", file=sys.stderr)
            return 2
        _write(record, None, args.devlog)
        return 0
    loaded: list[tuple[Path, RunResults]] = []
    for path in [*args.from_json, *args.rerun]:
        try:
            loaded.append((path, load_results(path)))
        except ResultsError as exc:
            print(f"devlog: {exc}; pass a file written by --kforge-json", file=sys.stderr)
            return 2
    parts, reruns = loaded[:len(args.from_json)], loaded[len(args.from_json):]
    for group, what in ((parts, "pass the parts of one run, each version in one of them"),
                        (reruns, "give each version's re-run once")):
        seen: dict[str, Path] = {}  # version -> the file it came from
        for path, data in group:
            for v in data.versions():
                if v in seen and seen[v] != path:
                    print(f"devlog: version {v} is in both {seen[v]} and {path}; {what}", file=sys.stderr)
                    return 2
                seen[v] = path
    results: list[TrialResult] = [row for _, d in parts for row in d.results]
    in_parts = {row.version for row in results}
    notes = []
    for path, data in reruns:
        redone = data.versions()
        results = [row for row in results if row.version not in redone] + list(data.results)
        print(f"devlog: {', '.join(redone) or 'no version'} from the re-run {path} (their rows in the parts "
              "left out)", file=sys.stderr)
        stray = [v for v in redone if v not in in_parts]
        if stray:
            print(f"devlog: warning: {', '.join(stray)} of the re-run {path} are in none of the parts: is it the "
                  "re-run of this run?", file=sys.stderr)
        if redone:
            notes.append(f"{', '.join(redone)} from a re-run ({path.name}, started "
                         f"{str(data.started or '?')[:16]}), in place of their rows in the parts.")
    every = [d for _, d in loaded]
    gpus = sorted({str(d.gpu) for d in every if d.gpu})
    dates = sorted(str(d.started)[:10] for d in every if d.started)
    kernels = sorted({d.kernel for d in every if d.kernel})
    trials = [t.strip() for t in args.trials.split(",") if t.strip()]
    roofs = [d.roofline for d in every if d.roofline]
    record = compute(kernels[0] if len(kernels) == 1 else "/".join(kernels) or "kernel", results, trials,
                     gpu=" / ".join(gpus) or None, date=dates[0] if dates else "", command=args.command,
                     sources=[_relative(p) for p, _ in parts], reruns=notes, roofline=roofs[0] if roofs else None)
    _write(record, args.best_json, args.devlog)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
