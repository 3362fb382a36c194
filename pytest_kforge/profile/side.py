"""Side by side under ncu's full section set: where one candidate's kernels spend what another's do not.

    python -m pytest_kforge.profile.side --kernel mla --trial spec --candidates v35_cute,peer:flashmla \\
        --out reports/side/mla-spec

The profile contract (:mod:`pytest_kforge.profile.run`) reads a fixed, small metric set per version;
when a peer is faster on the same trial, the question is *where*: instructions per tile, shared-memory
wavefronts, issue stalls, the clock the SMs ran at.  For each candidate (a version, or ``peer:NAME``
from ``benchmarks/peers``) this runs the profile driver once under ``ncu --set full`` (clocks not
locked, caches flushed, only the kernels of the one call in the driver's NVTX range), exports the
raw page, and writes ``side.md``: one column per kernel, rows for the curated metrics below plus
every warp-stall reason and pipe utilisation ncu reported, largest first.  Raw CSVs and ``.ncu-rep``
files stay beside it (the latter are git-ignored).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .command import NVTX_INCLUDE, driver_command, export_csv_command
from .parse import KernelRecord, NcuParseError, parse_raw_csv, write_csv_gz

__all__ = ["CURATED", "side_command", "metric_rows", "render", "main"]

#: (raw ncu metric, label), shown first when a kernel reports it
CURATED: tuple[tuple[str, str], ...] = (
    ("gpu__time_duration.sum", "duration"),
    ("sm__cycles_elapsed.avg.per_second", "SM clock"),
    ("launch__grid_size", "grid"),
    ("launch__block_size", "block"),
    ("launch__registers_per_thread", "registers / thread"),
    ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe busy"),
    ("smsp__inst_executed.sum", "warp instructions"),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue slots busy"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smem wavefronts (LSU)"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smem bank conflicts (LSU)"),
    ("dram__bytes_read.sum", "DRAM read"),
    ("lts__t_bytes.sum", "L2 traffic"),
)
#: metric families listed whole (prefix, suffix, label prefix)
FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("smsp__average_warps_issue_stalled_", "_per_issue_active.ratio", "stall (warps per issue): "),
    ("sm__inst_executed_pipe_", ".avg.pct_of_peak_sustained_active", "pipe: "),
)


def side_command(kernel: str, candidate: str, trial: str, *, out: str | Path, ncu: str = "ncu",
                 python: str | None = None, kernels_dir: str | Path | None = None) -> list[str]:
    """``ncu --set full`` over the driver's one call of ``candidate`` (``vN`` or ``peer:NAME``)."""
    out = str(out).removesuffix(".ncu-rep")
    return [ncu, "--target-processes", "all", "--clock-control", "none", "--cache-control", "all",
            "--replay-mode", "kernel", "--nvtx", "--nvtx-include", NVTX_INCLUDE, "--set", "full",
            "--force-overwrite", "--export", out,
            *driver_command(kernel, candidate, trial, kernels_dir=kernels_dir, python=python)]


def _short(name: str) -> str:
    """A kernel's name without template arguments and namespaces, cut to 40 characters."""
    base = name.split("(")[0].split("<")[0].replace("void ", "").strip()
    return base.rsplit("::", 1)[-1][:40]


def metric_rows(records: Sequence[KernelRecord]) -> list[tuple[str, str]]:
    """(raw metric, label) rows for these kernels: the curated ones they report, then each family's
    members with a non-zero value anywhere, largest first."""
    have = set().union(*(r.raw for r in records)) if records else set()
    rows = [(m, label) for m, label in CURATED if m in have]
    for prefix, suffix, tag in FAMILIES:
        members = [m for m in have if m.startswith(prefix) and m.endswith(suffix)]
        top = {m: max((r.raw.get(m, (None, ""))[0] or 0.0) for r in records) for m in members}
        rows += [(m, tag + m[len(prefix):-len(suffix)]) for m in sorted(members, key=lambda m: -top[m]) if top[m] > 0]
    return rows


#: ncu's base units shown in the unit an engineer reads them in: (unit, factor, shown as)
_READABLE = {"hz": (1e-6, "MHz"), "byte": (1e-6, "MB"), "inst": (1.0, "")}


def _cell(value: float | None, unit: str) -> str:
    """``866,272 ns``, ``1,743 MHz`` (not 1,742,566,877 hz), ``278 MB``; the stall ratios carry no unit (ncu
    labels them "inst"; they are warps stalled for that reason per issued instruction)."""
    if value is None:
        return "-"
    factor, shown = _READABLE.get(unit.strip().lower(), (1.0, unit))
    value *= factor
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{text} {shown}".strip()


def _is_copy(name: str) -> bool:
    """A torch copy/elementwise kernel (a peer's copy into the harness's buffers), not the candidate's own."""
    return any(k in name for k in ("elementwise_kernel", "direct_copy", "copy_kernel"))


def render(by_candidate: Mapping[str, Sequence[KernelRecord]], *, kernel: str, trial: str) -> str:
    """The side-by-side markdown: one column per (candidate, kernel), one row per metric."""
    cols = [(cand, rec) for cand, recs in by_candidate.items() for rec in recs]
    lines = [f"## ncu side by side: {kernel} {trial}", ""]
    for cand, recs in by_candidate.items():
        total = sum((r.raw.get("gpu__time_duration.sum", (None, ""))[0] or 0.0) for r in recs)
        unit = next((r.raw["gpu__time_duration.sum"][1] for r in recs if "gpu__time_duration.sum" in r.raw), "")
        names = ", ".join(_short(r.name) for r in recs) or "no kernel in the range"
        own = sum((r.raw.get("gpu__time_duration.sum", (None, ""))[0] or 0.0) for r in recs if not _is_copy(r.name))
        extra = f" ({_cell(own, unit)} without torch copy/elementwise kernels)" if own != total else ""
        lines.append(f"- `{cand}`: {len(recs)} kernel(s) ({names}), duration {_cell(total, unit)} in all{extra}")
    if not cols:
        return "\n".join(lines + ["", "(no kernels were profiled)"]) + "\n"
    lines += ["", "| metric | " + " | ".join(f"{c} / {_short(r.name)}" for c, r in cols) + " |",
              "|---|" + "---|" * len(cols)]
    for metric, label in metric_rows([r for _, r in cols]):
        cells = [_cell(*r.raw.get(metric, (None, ""))) for _, r in cols]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import subprocess

    from .collect import find_ncu

    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.profile.side", description=__doc__.split("\n")[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--trial", required=True)
    ap.add_argument("--candidates", required=True, help="comma list of versions and peer:NAME, e.g. v35_cute,peer:flashmla")
    ap.add_argument("--out", required=True, help="folder for side.md, the raw CSVs and the .ncu-rep files")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per candidate (default 300)")
    ap.add_argument("--kernels-dir", default=None, help="the kernels folder (default: the project's)")
    args = ap.parse_args(argv)
    cands = [c.strip() for c in args.candidates.split(",") if c.strip()]
    if not cands:
        ap.error("--candidates is empty; name at least one version or peer:NAME")
    ncu = find_ncu()
    if ncu is None:
        print("side: ncu is not on PATH (or $KFORGE_NCU); install Nsight Compute or point KFORGE_NCU at it",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    by_candidate: dict[str, list[KernelRecord]] = {}
    for cand in cands:
        stem = out / cand.replace(":", "-")
        log = out / f"{stem.name}.log"
        cmd = side_command(args.kernel, cand, args.trial, out=stem, ncu=ncu, python=sys.executable,
                           kernels_dir=args.kernels_dir)
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            log.write_text(res.stdout + res.stderr)
            said = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith(("KFORGE-DRIVER:", "==ERROR=="))]
            if res.returncode != 0 or not said or not said[-1].startswith("KFORGE-DRIVER: ok:"):
                print(f"side: {cand}: the profiled run failed (ncu exit {res.returncode}): "
                      f"{said[-1] if said else 'no driver line'}; see {log}", file=sys.stderr)
                return 1
            exp = subprocess.run(export_csv_command(f"{stem}.ncu-rep", ncu=ncu), capture_output=True, text=True,
                                 timeout=args.timeout)
            if exp.returncode != 0:
                print(f"side: {cand}: `ncu --import {stem}.ncu-rep` exited {exp.returncode}: "
                      f"{(exp.stderr.strip().splitlines() or ['no message'])[-1]}", file=sys.stderr)
                return 1
            write_csv_gz(out / f"{stem.name}.csv.gz", exp.stdout)  # ~10x smaller, as reports keep them
            by_candidate[cand] = parse_raw_csv(exp.stdout)
        except subprocess.TimeoutExpired:
            print(f"side: {cand}: ncu ran past --timeout {args.timeout:g} s; raise it (see {log})", file=sys.stderr)
            return 1
        except NcuParseError as exc:
            print(f"side: {cand}: {exc}", file=sys.stderr)
            return 1
        # written after every candidate, so a run cut short keeps the columns it has
        (out / "side.md").write_text(render(by_candidate, kernel=args.kernel, trial=args.trial))
    print((out / "side.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
