"""Fixed cost against streaming cost: one trial timed at several values of one parameter, a line fitted per candidate.

    python -m benchmarks.scaling --kernel mla --versions v35_cute,v36_cute --peers flashmla \\
        --trial spec --vary t=2048,4096,8192 --rounds 40 --out scaling.md --json scaling.json

Two kernels can take the same time for different reasons: one streams its work slower, the other
pays more per tile (launch, prologue, epilogue, a combine step, the last wave).  Timing each
candidate at several sequence lengths separates the two when the grid does not change with the
varied parameter: ``T(x) = fixed + slope * x``.  On MLA's spec trial every version's CTAs each own a
(row block, sequence) tile whatever ``t`` is, so ``fixed`` is the per-tile edges times the rounds of
tiles the busiest SM runs, and ``slope`` the cost of streaming the KV pages (the seesaw pairs) over
those rounds -- a partly idle last wave is in the slope, since it lasts as long as a tile does.

Each value is one call of :func:`benchmarks.compare.compare`: the same inputs for every candidate,
the harness's correctness check on fresh inputs, its timer (CUDA events, L2 flushed, median).  A
candidate that is wrong or unsupported at any value gets no fit, and its row says why.  The fit's
largest residual (percent of the time at that value) says how well a line describes it: a kernel
whose split count or grid changes with ``x`` bends the line, and its ``fixed`` then means little.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Fit", "fit_line", "parse_vary", "scaling", "render_markdown", "main"]


@dataclasses.dataclass
class Fit:
    """``median_us = fixed_us + slope_us * x`` by least squares over the measured values."""

    fixed_us: float
    slope_us: float  # per unit of the varied parameter
    max_residual_pct: float  # the largest |measured - fitted| / measured, in percent

    def at(self, x: float) -> float:
        return self.fixed_us + self.slope_us * x


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least-squares line through ``(xs, ys)``; needs two or more distinct ``xs``."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError(f"a line needs two or more distinct values, got x={list(xs)}")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    fixed = my - slope * mx
    worst = max(abs(y - (fixed + slope * x)) / y * 100.0 for x, y in zip(xs, ys))
    return Fit(fixed, slope, worst)


def parse_vary(text: str) -> tuple[str, list[int]]:
    """``"t=2048,4096,8192"`` -> ``("t", [2048, 4096, 8192])``; one sentence on what is wrong otherwise."""
    name, _, values = text.partition("=")
    parts = [v.strip() for v in values.split(",") if v.strip()]
    if not name.strip() or not parts or not all(p.isdigit() for p in parts):
        raise SystemExit(f"--vary {text!r}: write NAME=V1,V2,... with positive integers, e.g. t=2048,4096,8192")
    vals = sorted({int(p) for p in parts})
    if len(vals) < 2:
        raise SystemExit(f"--vary {text!r}: a line needs two or more distinct values; add one, e.g. "
                         f"{name.strip()}={vals[0]},{vals[0] * 2}")
    return name.strip(), vals


def scaling(*, kernel: str, versions: Sequence[str], peers: Sequence[str], trial: str, name: str,
            values: Sequence[int], params: Mapping[str, int] | None = None, device: str = "cuda",
            rounds: int = 40, warmup: int = 5, seed: int = 0, check_repeats: int = 2,
            kernels_dir: str | Path | None = None,
            log: Callable[[str], None] = lambda _m: None,
            on_point: Callable[[dict[str, Any]], None] = lambda _d: None) -> dict[str, Any]:
    """Every candidate timed at ``trial`` with ``name`` set to each of ``values``; a fit per candidate.

    Returns ``{"meta": ..., "rows": [{"name", "kind", "language", "points": {x: cell}, "fit", "why"}]}``
    (a JSON-ready dict; ``fit`` is None with ``why`` saying what stopped it).  ``on_point`` gets the data so far
    after each value (points, no fits yet), so a run cut short keeps what it measured.
    """
    from benchmarks.compare import compare

    rows: dict[str, dict[str, Any]] = {}
    meta: dict[str, Any] = {"kernel": kernel, "trial": trial, "vary": name, "values": list(values),
                            "device": device, "rounds": rounds, "warmup": warmup, "seed": seed, "points": {}}
    for x in values:
        p = {**dict(params or {}), name: x}
        log(f"[{name}={x}] comparing {', '.join([*versions, *peers])}")
        got, m = compare(kernel=kernel, versions=versions, peers=peers, trials=(trial,), params=p, device=device,
                         rounds=rounds, warmup=warmup, seed=seed, check_repeats=check_repeats,
                         kernels_dir=kernels_dir, log=log)
        meta["timer"] = m.get("timer")
        meta["points"][str(x)] = m["trials"][trial]
        for r in got:
            row = rows.setdefault(r.name, {"name": r.name, "kind": r.kind, "language": r.language, "points": {},
                                           "fit": None, "why": ""})
            cell = dataclasses.asdict(r.cells[trial]) if trial in r.cells else {}
            if r.skipped:  # compare leaves an empty cell for a candidate that cannot run here
                cell["message"] = f"skipped: {r.skipped}"
            row["points"][str(x)] = cell
        on_point({"meta": meta, "rows": list(rows.values())})
    for row in rows.values():
        bad = [f"{name}={x}: {c.get('message') or 'not timed'}" for x, c in row["points"].items()
               if not c.get("correct") or c.get("median_us") is None]
        if bad:
            row["why"] = "no fit: " + "; ".join(bad)
            continue
        suspect = [f"{name}={x}: {c['message']}" for x, c in row["points"].items() if c.get("message")]
        if suspect:  # correct, but the timer flagged the point (floor, side stream): fitted, and said
            row["why"] = "suspect timing: " + "; ".join(suspect)
        xs = [float(x) for x in row["points"]]
        f = fit_line(xs, [row["points"][x]["median_us"] for x in row["points"]])
        row["fit"] = dataclasses.asdict(f)
    return {"meta": meta, "rows": list(rows.values())}


def render_markdown(data: Mapping[str, Any], *, at: int | None = None) -> str:
    """One row per candidate: the medians, the fitted fixed cost, the slope per 1,000 of the varied
    parameter, the fixed cost's share of the time at ``at`` (default: the middle value) and the worst residual."""
    from benchmarks.compare import _fmt

    meta = data["meta"]
    name, values = meta["vary"], [int(v) for v in meta["values"]]
    at = at if at is not None else values[len(values) // 2]
    head = ["name", *(f"{name}={v} us" for v in values), "fixed us", f"us per 1,000 {name}",
            f"fixed share at {name}={at}", "worst residual", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in data["rows"]:
        pts = [r["points"].get(str(v), {}) for v in values]
        f = r.get("fit")
        if f:
            fit_cells = [_fmt(f["fixed_us"]), _fmt(f["slope_us"] * 1000, 2),
                         f"{100.0 * f['fixed_us'] / Fit(**f).at(at):.1f}%",
                         f"{f['max_residual_pct']:.2f}%" if len(values) > 2 else "n/a (2 points)"]
        else:
            fit_cells = ["-", "-", "-", "-"]
        note = (r.get("why") or "").replace("|", "\\|").replace("\n", " ")
        lines.append("| " + " | ".join([r["name"], *(_fmt(c.get("median_us")) for c in pts), *fit_cells, note]) + " |")
    when = meta.get("measured") or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    info = [f"Measured {when} on {meta.get('gpu') or meta['device']}, timer: {meta.get('timer') or '-'}, "
            f"median of {meta['rounds']} rounds after {meta['warmup']} warm-up, seed {meta['seed']}; "
            f"trial `{meta['trial']}` with `{name}` varied, every point checked for correctness first.",
            f"- fit: median = fixed + slope x {name} (least squares); fixed holds what does not grow with {name} "
            "(launch, per-tile prologue and epilogue, a combine step) only while the grid does not change with "
            f"{name}: a large worst residual says it did. A partly idle last wave grows with {name} and lands in the slope."]
    for v, tm in meta.get("points", {}).items():
        info.append(f"- `{name}={v}`: `{tm['id']}`, floor {tm['floor_us']:.1f} us")
    if meta.get("command"):
        info.append(f"- command: `{meta['command']}`")
    return "\n".join([*info, "", *lines]) + "\n"


def _json_text(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.compare import add_run_args, default_device

    ap = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="mla")
    ap.add_argument("--versions", default="", help="comma-separated versions")
    ap.add_argument("--peers", default="", help="comma-separated peers (benchmarks.peers.PEERS)")
    ap.add_argument("--trial", default="spec", help="one trial config of the kernel's spec")
    ap.add_argument("--vary", default=None, help="the parameter and its values, e.g. t=2048,4096,8192")
    ap.add_argument("--params", default="", help="other trial params to override, e.g. b=2,h=16 (CPU smoke runs)")
    ap.add_argument("--at", type=int, default=None, help="the value the fixed share is quoted at (default: middle)")
    add_run_args(ap)
    ap.add_argument("--json", default=None, help="write the points and fits as JSON here")
    ap.add_argument("--from-json", default=None, metavar="PATH",
                    help="run nothing: re-render a --json file written earlier (e.g. on the GPU machine)")
    args = ap.parse_args(argv)
    from benchmarks.compare import _parse_params
    from pytest_kforge.fsutil import atomic_write_text

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
    else:
        if not args.vary:
            ap.error("--vary is required (e.g. --vary t=2048,4096,8192), unless --from-json re-renders a run")
        name, values = parse_vary(args.vary)
        params = _parse_params(args.params)
        if name in params:
            ap.error(f"--params sets {name}, which --vary varies; drop it from --params")
        versions = [v.strip() for v in args.versions.split(",") if v.strip()]
        peers = [p.strip() for p in args.peers.split(",") if p.strip()]
        if not versions and not peers:
            ap.error("nothing to time: pass --versions and/or --peers")
        if "," in args.trial:
            ap.error(f"--trial {args.trial!r}: one trial per run (the fit is per trial); run once per trial")
        device = default_device(args.device)

        def partial(d: dict[str, Any]) -> None:  # the points so far, in case the run is cut short
            if args.json:
                atomic_write_text(args.json + ".partial", _json_text(d))

        data = scaling(kernel=args.kernel, versions=versions, peers=peers, trial=args.trial, name=name,
                       values=values, params=params, device=device, rounds=args.rounds, warmup=args.warmup,
                       seed=args.seed, check_repeats=args.check_repeats, kernels_dir=args.kernels_dir,
                       log=lambda m: print(m, file=sys.stderr, flush=True), on_point=partial)
        if device.startswith("cuda"):
            from pytest_kforge.gpuinfo import gpu_name

            data["meta"]["gpu"] = gpu_name()
        data["meta"]["command"] = "python -m benchmarks.scaling " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        data["meta"]["measured"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    text = render_markdown(data, at=args.at)
    print(text)
    if args.out:
        atomic_write_text(args.out, text)
    if args.json and not args.from_json:
        atomic_write_text(args.json, _json_text(data))
        Path(args.json + ".partial").unlink(missing_ok=True)
    wrong = [r["name"] for r in data["rows"] for c in r["points"].values() if c.get("correct") is False]
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
