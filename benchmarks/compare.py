"""Versions and peers side by side: same inputs, same correctness check, same timer.

    python -m benchmarks.compare --kernel mla --versions v0,v4 \\
        --peers torch_bmm,flashinfer_fa3,flashinfer_fa2 --trial decode,spec --out peers.md [--devlog]

For every trial config the inputs are built once (``SPEC.make_inputs``, one seed) and every
candidate, version or peer, is

1. checked with the harness's own :func:`pytest_kforge.correctness.check_version` (poisoned
   outputs, inputs must stay unmodified, fresh inputs reusing the output buffers, compared with
   ``SPEC.reference``); a peer goes through a small shim that looks like a version;
2. prepared, untimed, when it is a peer with ``prepare`` (FlashInfer's ``plan()``);
3. timed with :mod:`pytest_kforge.timing` (``make_clock`` + ``time_launch``: CUDA events, L2
   flushed before each round) on the shared inputs, holding the per-GPU lock of
   :func:`pytest_kforge.xdist.gpu_lock` so no other kforge process times on that GPU meanwhile.

The markdown table (printed, written to ``--out``, and with ``--devlog`` into the ``peers``
block of ``docs/kernels/<kernel>.md``) has one row per candidate.  Candidates that cannot run
here (no GPU, FlashInfer not importable, a DSL missing) get a row saying why; a cell whose shape
or device a candidate cannot compute (its ``supports(params)``) says ``unsupported: <reason>``
and is neither checked nor timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import gzip
import json
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Cell", "Row", "compare", "render_markdown", "add_run_args", "default_device", "main"]


@dataclasses.dataclass
class Cell:
    """One candidate on one trial config."""

    trial: str
    trial_id: str
    median_us: float | None = None
    min_us: float | None = None
    spread_pct: float | None = None
    rounds: int = 0
    tflops: float | None = None
    pct_floor: float | None = None
    floor_us: float | None = None
    correct: bool | None = None  # None: not checked (skipped)
    message: str = ""
    #: the host's median time to enqueue one call (Python, argument checks, launches), beside the device time: one
    #: call per timed round, after a synchronize and a spin (cold)
    host_us: float | None = None
    #: the same, for calls issued back to back (``timing.back_to_back``): what a serving loop pays per call
    host_b2b_us: float | None = None
    #: the SM clock fields of the timed rounds (pytest_kforge.gpuclock.clock_fields; empty without NVML)
    clock: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Row:
    name: str
    kind: str  # "version" | "peer"
    language: str
    skipped: str | None = None
    cells: dict[str, Cell] = dataclasses.field(default_factory=dict)

    @property
    def correct(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        bad = [f"{c.trial}: {c.message}" for c in self.cells.values() if c.correct is False]
        if bad:
            return "NO (" + "; ".join(bad) + ")"
        unsupported = [f"{c.trial}: {c.message}" for c in self.cells.values() if c.correct is None and c.message]
        suspect = [f"{c.trial}: {c.message}" for c in self.cells.values() if c.correct and c.message]
        if not any(c.correct for c in self.cells.values()):
            return "; ".join(unsupported) or "-"
        text = "yes"
        if suspect:
            text += f" (suspect timing: {'; '.join(suspect)})"
        if unsupported:
            text += f" ({'; '.join(unsupported)})"
        return text


def _parse_params(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        if part.strip():
            key, _, val = part.partition("=")
            if not val.strip().lstrip("-").isdigit():
                raise SystemExit(f"--params {text!r}: {part!r} is not NAME=INTEGER; write e.g. b=2,t=130,h=16")
            out[key.strip()] = int(val)
    return out


def _time(launch: Callable[[], Any], *, device: str, rounds: int, warmup: int,
          floor_s: float) -> tuple[list[float], str, str, dict[str, Any], tuple[float | None, float | None]]:
    """``(samples_s, timer label, problem or "", clock fields, (host median s of a timed round, of a call issued
    back to back))`` from the project's timer (clock guard on).

    The one seam to change if :mod:`pytest_kforge.timing`'s API moves.
    """
    from pytest_kforge.timing import back_to_back, floor_problem, make_clock, side_stream_problem, time_launch

    clock = make_clock(device)
    res = time_launch(launch, clock=clock, rounds=rounds, warmup=warmup)
    problem = floor_problem(res.median_s, floor_s) or (side_stream_problem(res) if device.startswith("cuda") else None)
    import statistics

    b2b: list[float] = []
    back_to_back(launch, clock=clock, host_s=b2b)
    host = (statistics.median(res.host_s) if res.host_s else None, statistics.median(b2b) if b2b else None)
    return list(res.samples_s), f"{res.clock}; {res.flush}", problem or "", res.clock_fields(), host


def _gpu_lock(device: str) -> Any:
    import contextlib

    if not device.startswith("cuda"):
        return contextlib.nullcontext()
    from pytest_kforge.xdist import gpu_lock

    return gpu_lock()


def compare(
    *,
    kernel: str = "mla",
    versions: Sequence[str] = (),
    peers: Sequence[str] = (),
    trials: Sequence[str] = ("decode", "spec"),
    params: Mapping[str, int] | None = None,
    device: str = "cuda",
    rounds: int = 40,
    warmup: int = 5,
    seed: int = 0,
    check_repeats: int = 2,
    kernels_dir: str | Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> tuple[list[Row], dict[str, Any]]:
    """Run every candidate on every trial; returns the rows and run metadata (timer, notes...)."""
    from benchmarks.peers import PeerVersion, get_peer
    from pytest_kforge.correctness import check_version
    from pytest_kforge.registry import load_kernel
    from pytest_kforge.spec import poison_

    k = load_kernel(kernel, kernels_dir)
    spec = k.spec
    meta: dict[str, Any] = {"kernel": kernel, "device": device, "seed": seed, "rounds": rounds,
                            "warmup": warmup, "trials": {}, "timer": None, "notes": {}}
    rows: list[Row] = []
    candidates: list[tuple[Row, Any, Any]] = []  # (row, version-like, peer or None)
    for name in versions:
        v = k.version(name)
        row = Row(name, "version", v.language)
        missing = v.toolchain_missing()
        row.skipped = str(missing) if missing else None
        if not row.skipped and v.language != "torch" and not device.startswith("cuda"):
            # the pytest plugin's rule (collect.skip_reason): DSL kernels run only on a GPU
            from pytest_kforge.errors import NoGPUError

            row.skipped = str(NoGPUError(f"{kernel} {name} ({v.language})"))
        candidates.append((row, v, None))
    for name in peers:
        p = get_peer(name)
        if p.kernel != kernel:
            raise SystemExit(f"peer {name!r} is for kernel {p.kernel!r}, not {kernel!r}; pick peers of {kernel}")
        row = Row(name, "peer", "peer")
        row.skipped = p.available()
        candidates.append((row, None if row.skipped else PeerVersion(p, spec, device), p))
    rows = [c[0] for c in candidates]
    roofline, meta["roofline"] = _roofline(device)

    for trial_name in trials:
        trial = spec.trial(trial_name).with_params(**dict(params or {}))
        floor_s = spec.floor_s(trial.params, roofline)
        flops = spec.flops(trial.params)
        meta["trials"][trial_name] = {"id": trial.id, "params": dict(trial.params), "floor_us": floor_s * 1e6,
                                      "flops": flops, "min_bytes": spec.min_bytes(trial.params)}
        log(f"[{trial.id}] building inputs (seed {seed}) on {device}")
        inputs = spec.make_inputs(trial.params, seed=seed, device=device)
        outputs = spec.alloc_outputs(trial.params, device=device)
        for row, version, peer in candidates:
            cell = row.cells[trial_name] = Cell(trial_name, trial.id, floor_us=floor_s * 1e6)
            if row.skipped:
                continue
            why = version.supports(trial.params) if hasattr(version, "supports") else None
            if why:
                cell.message = f"unsupported: {why}"
                continue
            log(f"[{trial.id}] {row.name}: correctness")
            report = check_version(version, trial.params, seed=seed + 1000, device=device, repeats=check_repeats)
            cell.correct = bool(report.ok)
            if not report.ok:
                cell.message = report.message
            if peer is not None:
                peer.prepare(**inputs)  # untimed: plans, JIT, one-off layout checks
            poison_(outputs)
            launch = version.bind(inputs, outputs)  # the public call, as the peers' own entry points

            log(f"[{trial.id}] {row.name}: timing {rounds} rounds")
            with _gpu_lock(device):
                samples, meta["timer"], problem, cell.clock, host_s = _time(launch, device=device, rounds=rounds,
                                                                            warmup=warmup, floor_s=floor_s)
            cell.host_us, cell.host_b2b_us = (None if x is None else x * 1e6 for x in host_s)
            from pytest_kforge.timing import summarize

            med, mn, _iqr, spread = summarize(samples)
            cell.median_us, cell.min_us, cell.spread_pct, cell.rounds = med * 1e6, mn * 1e6, spread, len(samples)
            cell.tflops = flops / med / 1e12
            cell.pct_floor = 100.0 * floor_s / med
            if cell.correct and not cell.message:
                cell.message = problem
        del inputs, outputs
    for _row, _v, peer in candidates:
        if peer is not None and not _row.skipped:
            notes = getattr(peer.load(), "notes", None)
            if notes:
                meta["notes"].update({f"{peer.module}:{k2}": v2 for k2, v2 in notes().items()})
    return rows, meta


def _roofline(device: str) -> tuple[Any, str]:
    """This GPU's ceilings and the phrase saying where they came from, as the pytest plugin resolves them
    (``[tool.kforge]``, the calibration cache, the shipped figures, the H200 default)."""
    from pytest_kforge.calibrate import device_name, roofline_for
    from pytest_kforge.config import load_config

    return roofline_for(device_name(device), load_config(Path.cwd()))


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def render_markdown(rows: Sequence[Row], meta: Mapping[str, Any], command: str) -> str:
    trials = list(meta["trials"])
    pair = " / ".join(trials)
    # JSON of runs before the back-to-back host figure keeps its old table (the devlog blocks re-render from it)
    b2b = any(c.host_b2b_us is not None for r in rows for c in r.cells.values())
    head = ["name", "kind", *(f"{t} us" for t in trials), f"TFLOP/s ({pair})", f"% of floor ({pair})",
            f"host us, back to back / one timed round ({'; '.join(trials)})" if b2b else f"host us ({pair})",
            "correct"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.cells.get(t, Cell(t, "")) for t in trials]
        lines.append("| " + " | ".join([
            r.name, r.kind if r.kind == "peer" else f"version ({r.language})",
            *(_fmt(c.median_us) for c in cells),
            " / ".join(_fmt(c.tflops) for c in cells),
            " / ".join(_fmt(c.pct_floor) for c in cells),
            # a pair per trial, the trials apart by "; " (run 34's "20.3 / 34.5 / 26.8 / 35.0" read as four trials)
            ("; ".join(f"{_fmt(c.host_b2b_us)} / {_fmt(c.host_us)}" for c in cells) if b2b
             else " / ".join(_fmt(c.host_us) for c in cells)),
            r.correct.replace("|", "\\|").replace("\n", " "),
        ]) + " |")
    when = meta.get("measured") or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    info = [f"Measured {when} on {meta.get('gpu') or meta['device']}, timer: {meta.get('timer') or '-'}, "
            f"median of {meta['rounds']} rounds after {meta['warmup']} warm-up, seed {meta['seed']}."]
    for t, tm in meta["trials"].items():
        info.append(f"- `{t}` = `{tm['id']}`: floor {tm['floor_us']:.1f} us "
                    f"({tm['flops'] / 1e9:.1f} GFLOP, {tm['min_bytes'] / 1e6:.1f} MB)")
    info.append("- host us: the host's median time to enqueue one call (Python, checks, launches), measured beside "
                "the device time; a call the host cannot issue faster than the device runs it is host-bound."
                + (" Back to back: calls issued in a loop (a serving loop's steady state); one timed round: a single "
                   "call after a synchronize and a spin (cold caches)." if b2b else ""))
    if meta.get("roofline"):
        info.append(f"- floors from the {meta['roofline']}")
    if any(r.name.startswith("torch_bmm") for r in rows):
        info.append("- torch_bmm gathers the paged cache inside the timed call (every candidate starts from the "
                    "paged cache); torch_bmm_contig gathers once, untimed, like the reference's contiguous-cache figure.")
    for key, note in meta.get("notes", {}).items():
        info.append(f"- {key}: {note}")
    info.append(f"- command: `{command}`")
    return "\n".join([*info, "", *lines]) + "\n"


def add_run_args(ap: argparse.ArgumentParser) -> None:
    """The options every side-by-side run shares (this module's and :mod:`benchmarks.scaling`'s)."""
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-repeats", type=int, default=2)
    ap.add_argument("--kernels-dir", default=None)
    ap.add_argument("--out", default=None, help="write the markdown table here")


def default_device(device: str | None) -> str:
    """``device``, else cuda when torch sees a GPU, else cpu."""
    if device is not None:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="mla")
    ap.add_argument("--versions", default="", help="comma-separated versions, or 'all'")
    ap.add_argument("--peers", default="", help="comma-separated peers (benchmarks.peers.PEERS), or 'all'")
    ap.add_argument("--trial", default="decode,spec")
    ap.add_argument("--params", default="", help="override trial params, e.g. b=2,t=130,h=16 (CPU smoke runs)")
    add_run_args(ap)
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    ap.add_argument("--devlog", nargs="?", const="", default=None,
                    help="rewrite the `peers` block of docs/kernels/<kernel>.md (or the given path); with --by-trial "
                         "the `serving` block")
    ap.add_argument("--by-trial", action="store_true",
                    help="one row per trial (shape) instead of per candidate (benchmarks.shape_table), for many trials")
    ap.add_argument("--from-json", default=None, metavar="PATH",
                    help="run nothing: re-render a --json file written earlier (e.g. on the GPU machine; .json.gz too)")
    args = ap.parse_args(argv)
    if args.from_json:
        return _from_json(args)

    from benchmarks.peers import PEERS
    from pytest_kforge.fsutil import atomic_write_text
    from pytest_kforge.registry import load_kernel

    device = default_device(args.device)
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    if versions == ["all"]:
        versions = load_kernel(args.kernel, args.kernels_dir).version_names()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    if peers == ["all"]:
        peers = [n for n, p in PEERS.items() if p.kernel == args.kernel]
    if not versions and not peers:
        ap.error("nothing to compare: pass --versions and/or --peers")
    trials = [t.strip() for t in args.trial.split(",") if t.strip()]
    rows, meta = compare(kernel=args.kernel, versions=versions, peers=peers, trials=trials,
                         params=_parse_params(args.params), device=device, rounds=args.rounds,
                         warmup=args.warmup, seed=args.seed, check_repeats=args.check_repeats,
                         kernels_dir=args.kernels_dir, log=lambda m: print(m, file=sys.stderr, flush=True))
    if device.startswith("cuda"):
        from pytest_kforge.gpuinfo import gpu_name

        meta["gpu"] = gpu_name()
    command = "python -m benchmarks.compare " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    meta["command"] = command
    meta["measured"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    text = _render(args, rows, meta, command)
    print(text)
    if args.out:
        atomic_write_text(args.out, text)
    if args.json:
        atomic_write_text(args.json, json.dumps(
            {"meta": meta, "rows": [dataclasses.asdict(r) | {"correct_text": r.correct} for r in rows]},
            indent=2, default=str) + "\n")
    if args.devlog is not None:
        _to_devlog(args.devlog or f"docs/kernels/{args.kernel}.md", text, args.by_trial)
    return 1 if any(c.correct is False for r in rows for c in r.cells.values()) else 0


def _from_json(args: argparse.Namespace) -> int:
    from pytest_kforge.fsutil import atomic_write_text

    from pytest_kforge.artifacts import read_bytes

    raw_bytes = read_bytes(args.from_json)  # loose, or packed into a day's archive
    if args.from_json.endswith(".gz"):  # a committed JSON is gzipped (the checkout's size budget)
        raw_bytes = gzip.decompress(raw_bytes)
    data = json.loads(raw_bytes.decode("utf-8"))
    rows = []
    for raw in data["rows"]:
        cells = {k: Cell(**v) for k, v in raw.pop("cells").items()}
        raw.pop("correct_text", None)
        rows.append(Row(**raw, cells=cells))
    text = _render(args, rows, data["meta"], data["meta"].get("command") or "(see the JSON)")
    print(text)
    if args.out:
        atomic_write_text(args.out, text)
    if args.devlog is not None:
        _to_devlog(args.devlog or f"docs/kernels/{data['meta']['kernel']}.md", text, args.by_trial)
    return 0


def _render(args: argparse.Namespace, rows: Sequence[Row], meta: Mapping[str, Any], command: str) -> str:
    if args.by_trial:
        from benchmarks.shape_table import render_by_trial

        return render_by_trial(rows, meta, command)
    return render_markdown(rows, meta, command)


def _to_devlog(path: str, text: str, by_trial: bool) -> None:
    from pytest_kforge.fsutil import replace_marked_block

    if by_trial:
        replace_marked_block(path, "serving", text, heading="## Serving shapes")
    else:
        replace_marked_block(path, "peers", text, heading="## Peers")


if __name__ == "__main__":
    raise SystemExit(main())
