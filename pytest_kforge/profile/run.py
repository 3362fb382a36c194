"""Profile one version on its trial configs: collect under ncu, build, write, update the devlog.

Used by the pytest plugin (``--kforge-profile``) and ``python -m pytest_kforge.profile``.  Faults
never raise: each trial gets a :class:`TrialOutcome` whose ``line()`` is what the user reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .collect import DEFAULT_TIMEOUT_S, available_metrics, collect, find_ncu
from .features import version_features
from .parse import NcuParseError, display_name, load_records, read_csv_text
from .report import build_report, load_report_json, perf_block, report_json_path, write_report

__all__ = ["TrialOutcome", "profile_version"]


@dataclasses.dataclass
class TrialOutcome:
    kernel: str
    version: str
    trial: str
    md_path: Path | None = None
    json_path: Path | None = None
    rep_path: Path | None = None
    fault: str | None = None
    wall_s: float = 0.0
    bottleneck: str | None = None
    duration_us: float | None = None

    def line(self) -> str:
        if self.fault:
            return f"kforge profile {self.kernel} {self.version} {self.trial}: FAULT: {self.fault}"
        return (f"kforge profile {self.kernel} {self.version} {self.trial}: {self.bottleneck}-bound, "
                f"{self.duration_us:.1f} us GPU time, ncu {self.wall_s:.1f} s -> {self.md_path}")


def _find_csv(folder: Path, version: str, trial: str) -> Path | None:
    for name in (f"{trial}.csv", f"{version}-{trial}.csv", f"{version}/{trial}.csv"):
        for cand in (folder / f"{name}.gz", folder / name):  # the gzipped one is what collect writes now
            if cand.exists():
                return cand
    return None


def _peer_name(path: str | Path) -> str:
    """``flashmla`` for ``peer-flashmla.csv.gz`` (the name :mod:`.side` gives a peer's CSV)."""
    stem = Path(path).name.removesuffix(".gz").removesuffix(".csv")
    return stem.removeprefix("peer-") or stem


def profile_version(kernel: str, version: str, trials: Sequence[str] | None = None, *,
                    root: str | Path = ".", reports_dir: str | Path | None = None, ncu: str | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S, baseline: str | None = None,
                    from_csv: str | Path | None = None, update_devlog: bool = True,
                    kernels_dir: str | Path | None = None, roofline: Any = None,
                    params: Mapping[str, Mapping[str, int]] | None = None,
                    bench_us: Mapping[str, float] | None = None,
                    peer_csv: Mapping[str, Sequence[str | Path]] | None = None) -> list[TrialOutcome]:
    """Profile ``kernel version`` on ``trials`` (default: the spec's default trials).

    ``from_csv`` reads recorded raw CSVs (``<trial>.csv``, ``<version>-<trial>.csv`` or ``<version>/<trial>.csv``,
    each plain or gzipped ``.csv.gz``) instead of running ncu.  ``baseline`` names the version to compare with
    (default: the parent).
    ``params`` overrides a trial's parameters (e.g. b halved by the harness); ``bench_us`` is the
    harness's median per trial, recorded beside ncu's duration for the agreement check.
    ``peer_csv`` maps a trial to raw CSVs of peers profiled in the same capture (``peer-<name>.csv[.gz]``, as
    :mod:`.side` writes them): the report derives the gap to the best of them.
    """
    from pytest_kforge.registry import load_kernel, spec_tags

    root = Path(root)
    kdir = Path(kernels_dir) if kernels_dir else root / "kernels"
    reports = Path(reports_dir) if reports_dir else root / "reports"
    k = load_kernel(kernel, kdir)
    spec = k.spec
    language, parent, stage_names, declared = None, None, None, None
    try:
        v = k.version(version)
        language, parent, declared = v.language, v.parent, v.features
        stage_names = getattr(v.module, "STAGE_NAMES", None)
    except Exception as exc:  # noqa: BLE001 - a DSL missing here does not stop reading recorded data
        parent = None
        load_note = f"version module not importable here ({type(exc).__name__}); language/parent unknown"
    else:
        load_note = ""
    base_name = baseline or parent
    out_dir = reports / kernel / version
    outcomes: list[TrialOutcome] = []
    available = None
    exe = find_ncu(ncu) if from_csv is None else None
    if exe is not None:
        available = available_metrics(exe, cache=root / ".kforge-cache" / "ncu-query-metrics.txt")
        if roofline is None:  # this GPU's ceilings, as the suite resolves them (recorded CSVs keep the default)
            from pytest_kforge.calibrate import device_name, roofline_for
            from pytest_kforge.config import load_config

            roofline, _line = roofline_for(device_name("cuda"), load_config(root))
    for trial in trials or spec.default_trials:
        out = TrialOutcome(kernel, version, trial)
        loaded: list[str] | None = None
        outcomes.append(out)
        try:
            tc = spec.trial(trial)
        except KeyError as exc:
            out.fault = str(exc.args[0])
            continue
        p = dict(params[trial]) if params and trial in params else dict(tc.params)
        extra: dict[str, Any] = {"trial_id": tc.replaced(p).id}
        if from_csv is not None:
            csv_path = _find_csv(Path(from_csv), version, trial)
            if csv_path is None:
                out.fault = (f"no recorded CSV for {version} {trial} in {from_csv} (looked for {trial}.csv, "
                             f"{version}-{trial}.csv, each also .gz); pass the folder the capture wrote")
                continue
            extra["source"] = {"csv": csv_path.name, "recorded": True}
            rec_rep = csv_path.parent / (csv_path.name.removesuffix(".gz").removesuffix(".csv") + ".ncu-rep")
            if rec_rep.exists():  # keep the recorded report beside the generated one
                import shutil

                out_dir.mkdir(parents=True, exist_ok=True)
                out.rep_path = out_dir / f"{trial}.ncu-rep"
                if rec_rep.resolve() != out.rep_path.resolve():
                    shutil.copyfile(rec_rep, out.rep_path)
                extra["source"]["ncu_rep"] = out.rep_path.name
            else:  # say so, rather than leave a reader looking for a report that never existed
                extra["source"]["ncu_rep"] = None
                extra["source"]["ncu_rep_note"] = (f"no .ncu-rep: the recorded capture in {Path(from_csv).name}/ has "
                                                   f"only {csv_path.name}; the metrics come from that raw CSV")
                (out_dir / f"{trial}.ncu-rep").unlink(missing_ok=True)  # never a stale one from an older run
        else:
            # a fault must not leave an older profile looking current
            for ext in (".md", ".json", ".json.gz", ".csv", ".csv.gz"):
                (out_dir / f"{trial}{ext}").unlink(missing_ok=True)
            got = collect(kernel, version, trial, out_dir=out_dir, ncu=ncu, timeout_s=timeout_s, kernels_dir=kdir,
                          available=available, cwd=root, params=p if p != dict(tc.params) else None)
            out.wall_s = got.wall_s
            if got.fault:
                out.fault = got.fault
                continue
            csv_path = got.csv_path
            out.rep_path = got.rep_path
            loaded = got.loaded  # the modules the run imported: where features are detected
            extra["source"] = {"ncu_rep": f"{trial}.ncu-rep", "csv": csv_path.name if csv_path else None,
                               "ncu_wall_s": round(got.wall_s, 2), "command": got.command}
        try:
            records = load_records(csv_path=csv_path, rep_path=out.rep_path)
        except NcuParseError as exc:
            out.fault = str(exc)
            continue
        if not records:
            out.fault = f"the ncu data for {version} {trial} has no kernel rows; no kernel matched the NVTX filter"
            continue
        if csv_path is not None:  # the card the counters come from (a reader of a committed report needs it)
            gpu = display_name(read_csv_text(csv_path))
            if gpu:
                extra["gpu"] = gpu
        if bench_us and trial in bench_us:
            extra["bench_median_us"] = bench_us[trial]
        base = load_report_json(report_json_path(reports / kernel / base_name, trial)) if base_name else None
        applied = version_features(kdir, kernel, version, declared=declared, loaded=loaded)
        try:
            peers = {_peer_name(f): load_records(csv_path=f) for f in (peer_csv or {}).get(trial, ())}
            if peers:
                extra["peers"] = {n: str(f) for n, f in zip(peers, (peer_csv or {})[trial])}
            rep = build_report(kernel, version, trial, p, records, flops=spec.flops(p), min_bytes=spec.min_bytes(p),
                               roofline=roofline, stage_names=stage_names, language=language, baseline=base,
                               extra=extra, knowledge_root=root / "docs" / "knowledge", applied=applied, peers=peers,
                               kernel_tags=spec_tags(kernel, spec))
        except Exception as exc:  # noqa: BLE001 - one bad trial must not lose the others
            out.fault = f"could not build the report for {version} {trial}: {type(exc).__name__}: {exc}"
            continue
        if load_note:
            rep.data["notes"].append(load_note)
        if base_name and base is None:
            rep.data["notes"].append(f"no baseline: reports/{kernel}/{base_name}/{trial}.json.gz does not exist yet")
        if bench_us and trial in bench_us and bench_us[trial]:
            ncu_us = rep.data["metrics"].get("duration_us", 0.0)
            rep.data["ncu_vs_bench_pct"] = round((ncu_us - bench_us[trial]) / bench_us[trial] * 100, 2)
        out.md_path, out.json_path = write_report(rep, out_dir)
        out.bottleneck = rep.contract.bottleneck
        out.duration_us = rep.data["metrics"].get("duration_us")
    if update_devlog and (reports / kernel).is_dir():  # also drops rows whose profile just faulted
        from pytest_kforge.fsutil import replace_marked_block

        replace_marked_block(root / "docs" / "kernels" / f"{kernel}.md", "perf", perf_block(reports, kernel),
                             heading="## Performance profile")
    return outcomes
