"""Device capture: record real ncu outputs on the GPU machine for the CPU golden tests.

    python -m pytest_kforge.profile.capture --out "$OUT" [--kernel mla] [--versions v0,v1] [--trials decode,spec]

Writes at most 8 small files under ``--out`` (the device tool returns no more):

* ``summary.json``      timings, commands, faults, metric names used / dropped, tool versions;
* ``capture.log``       the same in words plus the tail of every ncu log;
* ``query-metrics.txt`` ``ncu --query-metrics`` for this GPU (base names; the doctor check input);
* ``ncu.tar.gz``        every ``.ncu-rep``, raw CSV and the ``--query-metrics-mode suffix`` listing;
* ``csv/<version>-<trial>.csv`` the raw CSVs of the first (up to) four runs, for quick reading.

Each step is independent: a failing step is logged and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from .collect import collect, find_ncu, run_command
from .command import driver_command, query_metrics_command
from .metrics import METRICS, check_metrics, ncu_metric_names, parse_query_metrics
from .parse import read_csv_text

_MAX_TAR = 15 * 1024 * 1024


def _tool_versions(ncu: str | None) -> dict[str, str]:
    info = {"python": platform.python_version()}
    for label, cmd in (("ncu", [ncu or "ncu", "--version"]),
                       ("nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                                       "--format=csv,noheader"])):
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            info[label] = (res.stdout.strip().splitlines() or [""])[-1]
        except (OSError, subprocess.SubprocessError) as exc:
            info[label] = f"unavailable: {exc}"
    try:
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except Exception as exc:  # noqa: BLE001
        info["torch"] = f"unavailable: {exc}"
    return info


def _versions(kernel: str, selector: str) -> list[str]:
    from pytest_kforge.registry import load_kernel

    k = load_kernel(kernel)
    names = k.version_names() if selector == "all" else [v.strip() for v in selector.split(",") if v.strip()]
    usable = []
    for name in names:
        try:
            if k.version(name).toolchain_missing() is None:
                usable.append(name)
        except Exception:  # noqa: BLE001 - a broken version must not stop the capture
            continue
    return usable


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.profile.capture", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="mla")
    ap.add_argument("--versions", default="all", help="comma list or 'all' (those whose DSL imports)")
    ap.add_argument("--trials", default="decode,spec")
    ap.add_argument("--ncu", default=None)
    ap.add_argument("--timeout", type=float, default=240.0, help="per ncu run, seconds")
    ap.add_argument("--budget", type=float, default=540.0,
                    help="whole capture, seconds: each run's timeout is cut to fit, none starts with < 30 s left")
    args = ap.parse_args(argv)

    t_start = time.monotonic()
    out = Path(args.out)
    work = out / "_work"
    work.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    summary: dict = {"kernel": args.kernel, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def note(msg: str) -> None:
        line = f"[{time.monotonic() - t_start:7.1f}s] {msg}"
        log.append(line)
        print(line, flush=True)

    ncu = find_ncu(args.ncu)
    summary["tools"] = _tool_versions(ncu)
    note(f"tools: {summary['tools']}")
    available: set[str] | None = None
    if ncu:
        t0 = time.monotonic()
        res = run_command(query_metrics_command(ncu=ncu), timeout_s=180)
        (out / "query-metrics.txt").write_text(res.stdout + ("\n# stderr:\n" + res.stderr if res.stderr else ""))
        names = parse_query_metrics(res.stdout)
        available = names if len(names) > 50 else None
        summary["query_metrics"] = {"rc": res.returncode, "s": round(time.monotonic() - t0, 2), "n_base": len(names)}
        note(f"query-metrics rc={res.returncode} bases={len(names)} in {time.monotonic() - t0:.1f}s")
        bases = sorted({n.split(".")[0] for d in METRICS.values() for n in d.names()})
        res2 = run_command(query_metrics_command(ncu=ncu, mode="suffix", metrics=bases), timeout_s=180)
        (work / "query-metrics-suffix.txt").write_text(res2.stdout + "\n# stderr:\n" + res2.stderr)
        note(f"query-metrics suffix rc={res2.returncode}")
        if available is not None:
            summary["metric_check"] = [list(r) for r in check_metrics(available)]
            for row in summary["metric_check"]:
                note(f"  metric {row[0]:<26} {row[1]:<9} {row[2]}")
    else:
        note("ncu not found on PATH")
    metrics = ncu_metric_names(available=available)
    summary["metrics_used"] = metrics
    summary["metrics_dropped"] = [n for n in ncu_metric_names() if n not in metrics]
    note(f"metrics used ({len(metrics)}): {','.join(metrics)}")

    runs: list[dict] = []
    timings: list[dict] = []
    diagnosed = False
    try:
        versions = _versions(args.kernel, args.versions)
    except Exception as exc:  # noqa: BLE001
        versions = []
        note(f"could not list versions: {exc}")
    note(f"versions: {versions}")
    try:  # whatever breaks, the summary and log below still get written
        for version in versions:
            for trial in [t.strip() for t in args.trials.split(",") if t.strip()]:
                left = args.budget - (time.monotonic() - t_start) - 15
                if left < 30:
                    note(f"budget spent; no plain timing of {version} {trial}")
                    continue
                # the same call timed with CUDA events outside ncu, to check ncu's durations against it
                res = run_command(driver_command(args.kernel, version, trial, time_n=30),
                                  timeout_s=min(args.timeout, left))
                line = [ln for ln in (res.stdout + res.stderr).splitlines() if "KFORGE-DRIVER:" in ln][-1:]
                timings.append({"version": version, "trial": trial, "wall_s": round(res.wall_s, 2),
                                "rc": res.returncode, "line": line[0] if line else (res.stderr[-500:])})
                note(f"plain timing {version} {trial}: {timings[-1]['line']} (wall {res.wall_s:.1f}s)")
                summary["event_timings"] = timings
                left = args.budget - (time.monotonic() - t_start) - 15
                if left < 30:
                    note(f"budget spent; skipping {version} {trial}")
                    continue
                got = collect(args.kernel, version, trial, out_dir=work / version, ncu=ncu,
                              timeout_s=min(args.timeout, left), metrics=metrics)
                runs.append({"version": version, "trial": trial, "wall_s": round(got.wall_s, 2), "fault": got.fault,
                             "command": got.command, "rep": str(got.rep_path or ""), "csv": str(got.csv_path or "")})
                note(f"{version} {trial}: wall {got.wall_s:.1f}s fault={got.fault}")
                log.append("    " + "\n    ".join(got.log.splitlines()[-40:]))
                if got.fault and not diagnosed and "timed out" not in got.fault and "permission" not in got.fault:
                    diagnosed = True  # once: tell a metric problem from an NVTX-filter problem
                    for label, kw in (("duration-only", {"metrics": ["gpu__time_duration.sum"]}),
                                      ("no-nvtx", {"metrics": ["gpu__time_duration.sum"], "nvtx_include": None,
                                                   "launch_count": 40})):
                        left = args.budget - (time.monotonic() - t_start) - 15
                        if left < 30:
                            break
                        d = collect(args.kernel, version, trial, out_dir=work / version, ncu=ncu,
                                    timeout_s=min(args.timeout, left), name=f"{trial}-diag-{label}", **kw)
                        runs.append({"version": version, "trial": f"{trial}-diag-{label}", "wall_s": round(d.wall_s, 2),
                                     "fault": d.fault, "command": d.command, "rep": str(d.rep_path or ""),
                                     "csv": str(d.csv_path or "")})
                        note(f"  diagnostic {label}: wall {d.wall_s:.1f}s fault={d.fault}")
                        log.append("    " + "\n    ".join(d.log.splitlines()[-40:]))
    except Exception:  # noqa: BLE001
        import traceback

        note("capture step failed:\n" + traceback.format_exc())
    summary["runs"] = runs
    summary["total_s"] = round(time.monotonic() - t_start, 2)

    # package: a few CSVs individually, everything in one tarball (<= 15 MB)
    csv_dir = out / "csv"
    for r in [r for r in runs if r["csv"]][:4]:
        csv_dir.mkdir(exist_ok=True)
        (csv_dir / f"{r['version']}-{r['trial']}.csv").write_text(read_csv_text(r["csv"]), encoding="utf-8")
    files = sorted(p for p in work.rglob("*") if p.is_file())
    with tarfile.open(out / "ncu.tar.gz", "w:gz") as tar:
        size = 0
        for p in files:
            if size + p.stat().st_size > _MAX_TAR:
                note(f"left out of the tarball (size): {p.relative_to(work)}")
                continue
            size += p.stat().st_size
            tar.add(p, arcname=str(p.relative_to(work)))
    shutil.rmtree(work, ignore_errors=True)
    note(f"done in {summary['total_s']}s")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "capture.log").write_text("\n".join(log) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
