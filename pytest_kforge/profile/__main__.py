"""``python -m pytest_kforge.profile``: profile a version outside pytest, or check the metric table.

    python -m pytest_kforge.profile --kernel mla --version v1 --trial decode,spec --out reports
    python -m pytest_kforge.profile --kernel mla --version v0 --trial decode --from-csv tests/data/ncu/h200
    python -m pytest_kforge.profile --list-metrics
    python -m pytest_kforge.profile --check-metrics [--ncu PATH]     # doctor: ncu --query-metrics

(Here ``--version`` is ours: this is not pytest, so it does not clash with pytest's own.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .metrics import METRICS, check_metrics


def _list_metrics() -> int:
    print(f"{'short name':<26} {'unit':<6} {'combine':<7} ncu metric(s), first candidate first")
    for d in METRICS.values():
        print(f"{d.short:<26} {d.unit:<6} {d.combine:<7} {' | '.join(' + '.join(c) for c in d.candidates)}")
    return 0


def _check_metrics(ncu: str | None, listing: str | None) -> int:
    from .collect import find_ncu, run_command
    from .command import query_metrics_command
    from .metrics import parse_query_metrics

    if listing:
        text = Path(listing).read_text(encoding="utf-8")
    else:
        exe = find_ncu(ncu)
        if exe is None:
            print("ERROR: ncu not found; install Nsight Compute or pass --ncu /path/to/ncu")
            return 2
        text = run_command(query_metrics_command(ncu=exe), timeout_s=180).stdout
    names = parse_query_metrics(text)
    if len(names) < 50:
        print(f"ERROR: `ncu --query-metrics` listed {len(names)} metrics; it needs a supported GPU "
              f"(or pass --chips via a saved listing: --listing FILE)")
        return 2
    bad = 0
    for short, status, detail in check_metrics(names):
        bad += status == "missing"
        print(f"{status.upper():<9} {short:<26} {detail}")
    print(f"{len(METRICS) - bad}/{len(METRICS)} short names resolvable on this ncu/GPU")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.profile", description=__doc__.split("\n")[0])
    ap.add_argument("--kernel", default="mla")
    ap.add_argument("--version", dest="kversion", default=None, help="the kernel version, e.g. v1")
    ap.add_argument("--trial", default=None, help="comma list (default: the spec's default trials)")
    ap.add_argument("--out", default=None, help="reports folder (default: ./reports)")
    ap.add_argument("--root", default=".", help="project root (kernels/, docs/)")
    ap.add_argument("--ncu", default=None, help="ncu executable (default: $KFORGE_NCU or ncu on PATH)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per ncu run")
    ap.add_argument("--baseline", default=None, help="version to compare with (default: the parent)")
    ap.add_argument("--from-csv", default=None, help="read recorded raw CSVs from this folder instead of running ncu")
    ap.add_argument("--gpu", default=None, metavar="NAME",
                    help="the GPU the --from-csv data was captured on (e.g. 'NVIDIA H100 80GB HBM3'): its calibrated "
                         "ceilings set the floors (default: this machine's GPU, the H200 default without one)")
    ap.add_argument("--no-devlog", action="store_true", help="do not update docs/kernels/<kernel>.md")
    ap.add_argument("--bench-json", default=None,
                    help="the harness's results JSON (--kforge-json): its median_us goes beside ncu's duration")
    ap.add_argument("--peer-csv", action="append", default=[], metavar="TRIAL=PATH",
                    help="a peer's raw CSV from the same capture (peer-<name>.csv.gz, as profile.side writes it); "
                         "the report derives the gap to it (repeatable)")
    ap.add_argument("--list-metrics", action="store_true", help="print the short-name -> ncu metric table")
    ap.add_argument("--check-metrics", action="store_true", help="check the table against ncu --query-metrics")
    ap.add_argument("--listing", default=None, help="with --check-metrics: a saved --query-metrics output")
    args = ap.parse_args(argv)
    if args.list_metrics:
        return _list_metrics()
    if args.check_metrics:
        return _check_metrics(args.ncu, args.listing)
    if not args.kversion:
        ap.error("--version is required (e.g. --version v1), or use --list-metrics / --check-metrics")
    from .run import profile_version

    trials = [t.strip() for t in args.trial.split(",")] if args.trial else None
    bench = None
    if args.bench_json:
        from ..results import ResultsError, load_results

        try:
            results = load_results(args.bench_json).results
        except ResultsError as exc:
            ap.error(f"--bench-json: {exc}")
        bench = {r.trial: float(r.median_us) for r in results if r.version == args.kversion and r.median_us}
    peer_csv: dict[str, list[str]] = {}
    for item in args.peer_csv:
        trial, sep, path = item.partition("=")
        if not sep or not trial or not path:
            ap.error(f"--peer-csv {item!r} is not TRIAL=PATH; write e.g. --peer-csv spec=side/peer-flashmla.csv.gz")
        peer_csv.setdefault(trial, []).append(path)
    roofline = None
    if args.gpu:
        from ..calibrate import roofline_for
        from ..config import load_config

        roofline, line = roofline_for(args.gpu, load_config(args.root))
        print(f"kforge profile: floors from the {line}")
    outcomes = profile_version(args.kernel, args.kversion, trials, root=args.root, reports_dir=args.out,
                               ncu=args.ncu, timeout_s=args.timeout, baseline=args.baseline,
                               from_csv=args.from_csv, update_devlog=not args.no_devlog, bench_us=bench,
                               peer_csv=peer_csv, roofline=roofline)
    for o in outcomes:
        print(o.line())
    return 0 if all(o.fault is None for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
