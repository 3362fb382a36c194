"""Run one version on one trial config under ncu in a subprocess, with a timeout.

:func:`collect` never raises for the five expected faults; it returns a :class:`Collected` whose
``fault`` is one line saying what happened and what to do:

* ncu missing;
* no permission for the GPU performance counters (``ERR_NVGPUCTRPERM``);
* no kernel matched the NVTX filter;
* ncu timed out;
* the kernel (or the driver) crashed under replay;
* the kernel's DSL toolchain does not import in the profiled process (``No module named 'cutlass'``):
  said as that, not as a crash, since the fix is the environment, not the kernel.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..errors import install_command
from ..registry import LANGUAGES
from .command import (DEFAULT_LAUNCH_COUNT, NVTX_INCLUDE, driver_command, export_csv_command, profile_command,
                      query_metrics_command)
from .metrics import ncu_metric_names, parse_query_metrics
from .parse import write_csv_gz

__all__ = ["Collected", "RunResult", "run_command", "find_ncu", "available_metrics", "collect", "classify_fault",
           "driver_lines", "toolchain_import_error"]

DEFAULT_TIMEOUT_S = 300.0


@dataclasses.dataclass
class RunResult:
    cmd: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float


@dataclasses.dataclass
class Collected:
    """What one profiling run produced: the report, its raw CSV, or a one-line fault."""

    kernel: str
    version: str
    trial: str
    rep_path: Path | None = None
    csv_path: Path | None = None
    fault: str | None = None
    wall_s: float = 0.0
    command: list[str] = dataclasses.field(default_factory=list)
    log: str = ""
    loaded: list[str] | None = None  # kernel-folder modules the driver's run imported (None: not reported)

    @property
    def ok(self) -> bool:
        return self.fault is None


def run_command(cmd: Sequence[str], *, timeout_s: float, cwd: str | Path | None = None,
                env: dict[str, str] | None = None) -> RunResult:
    """Run ``cmd`` in its own process group; on timeout kill the whole group (ncu and its child).

    The process handling is the sandbox's (:func:`pytest_kforge.trust.sandbox.spawn`); the whole
    output is kept, since the callers parse it (metric listings, raw CSV).
    """
    from ..trust.sandbox import spawn

    rc, out, err, timed_out, wall = spawn(cmd, timeout_s, cwd if cwd is not None else os.getcwd(), env,
                                          max_chars=None)
    return RunResult(list(cmd), None if timed_out else rc, out, err, timed_out, wall)


def find_ncu(ncu: str | None = None) -> str | None:
    """The ncu executable: ``ncu`` (an explicit path or name), ``$KFORGE_NCU``, or ``ncu`` on PATH."""
    name = ncu or os.environ.get("KFORGE_NCU") or "ncu"
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name)


def available_metrics(ncu: str, *, timeout_s: float = 120.0, cache: Path | None = None) -> set[str] | None:
    """Base names ``ncu --query-metrics`` lists for this GPU (None when it cannot say).

    ``cache`` keeps the listing (keyed by the ncu path) so later runs skip the query.
    """
    if cache is not None and cache.exists():
        names = parse_query_metrics(cache.read_text(encoding="utf-8"))
        if len(names) > 50:
            return names
    res = run_command(query_metrics_command(ncu=ncu), timeout_s=timeout_s)
    names = parse_query_metrics(res.stdout)
    if res.returncode != 0 or len(names) < 50:  # an error message, not a listing
        return None
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(res.stdout, encoding="utf-8")
    return names


def _child_env() -> dict[str, str]:
    """This environment, with pytest_kforge importable by the driver even from another cwd."""
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    return env


def driver_lines(text: str) -> list[str]:
    """What the driver said (``KFORGE-DRIVER: ...`` lines, the prefix dropped), in order."""
    return [ln.split("KFORGE-DRIVER:", 1)[1].strip() for ln in text.splitlines() if "KFORGE-DRIVER:" in ln]


#: top-level packages of the DSL toolchains (cuda.tile, cutlass, and cuda-python's cuda.bindings)
_TOOLCHAIN_PKGS = frozenset(mod.split(".")[0] for lang, (mod, _) in LANGUAGES.items() if lang != "torch")
_IMPORT_ERROR = re.compile(r"\b(?:ModuleNotFoundError|ImportError): (No module named '([\w.]+)'|"
                           r"cannot import name '\w+' from '([\w.]+)')")


def toolchain_import_error(text: str) -> str | None:
    """``No module named 'cutlass'`` (the first import error of a DSL toolchain package in ``text``), or None."""
    for m in _IMPORT_ERROR.finditer(text):
        if (m.group(2) or m.group(3)).split(".")[0] in _TOOLCHAIN_PKGS:
            return m.group(1)
    return None


def classify_fault(res: RunResult, *, what: str, timeout_s: float) -> str | None:
    """One line for a failed profiling run, or None when it worked."""
    text = res.stdout + "\n" + res.stderr
    driver = driver_lines(text)
    last = driver[-1] if driver else ""
    if res.timed_out:
        return (f"ncu timed out after {timeout_s:.0f} s profiling {what}; raise --kforge-ncu-timeout, "
                f"or check the version for a hang (run its tests without --kforge-profile)")
    if "ERR_NVGPUCTRPERM" in text:
        return (f"ncu has no permission to read the GPU performance counters ({what}); run as root or load "
                f"the driver with NVreg_RestrictProfilingToAdminUsers=0 (see NVIDIA's ERR_NVGPUCTRPERM page)")
    missing = None
    if last.startswith("toolchain:"):  # the driver's own check
        missing = toolchain_import_error(last) or last[len("toolchain:"):].strip()
    elif res.returncode != 0 or (driver and not last.startswith("ok:")):  # an import inside the version's run
        missing = toolchain_import_error(text)
    if missing:
        return (f"{what} was not profiled: its DSL toolchain is not importable in the process ncu ran "
                f"({missing}); install it with `{install_command()}` or, where it is staged outside "
                f"site-packages, source the GPU bundle's env.sh in the shell that runs the profile, then check "
                f"with `python -m pytest_kforge.doctor`")
    if last.startswith("unsupported:"):
        return f"not profiled: {last[len('unsupported:'):].strip()}"
    if last.startswith(("error:", "no-gpu:")):
        return f"the profiling driver could not start {what}: {last}; fix that, then rerun"
    if last.startswith("raised:"):
        return (f"{what} failed under ncu replay ({last[len('raised:'):].strip()}); run its correctness tests "
                f"without --kforge-profile, and under compute-sanitizer if they pass")
    if "No kernels were profiled" in text:
        if last.startswith("ok:") or res.returncode == 0:
            return (f"no kernel of {what} matched the filter --nvtx-include {NVTX_INCLUDE!r}; check that the "
                    f"version launches GPU kernels (a CPU fallback launches none) and that ncu traces NVTX")
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    bad_metric = [e for e in errors if "metric" in e.lower()]
    if bad_metric and not last.startswith("ok:"):
        return (f"ncu rejected a metric while profiling {what} ({bad_metric[0]}); run "
                f"`python -m pytest_kforge.profile --check-metrics` on this machine and fix the table in "
                f"pytest_kforge/profile/metrics.py")
    if res.returncode != 0 or errors or (driver and not last.startswith("ok:")):
        detail = errors[0] if errors else (last or f"exit code {res.returncode}")
        return (f"{what} crashed under ncu replay ({detail}); run it without --kforge-profile and under "
                f"compute-sanitizer to find the fault")
    if not driver:
        return (f"ncu ran but the profiling driver for {what} never reported (exit {res.returncode}); "
                f"run `{' '.join(res.cmd[-12:])}` by hand to see why")
    return None


def collect(kernel: str, version: str, trial: str, *, out_dir: str | Path, ncu: str | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S, kernels_dir: str | Path | None = None,
            launch_count: int = DEFAULT_LAUNCH_COUNT, metrics: Sequence[str] | None = None,
            available: set[str] | None = None, warmup: int = 3, cwd: str | Path | None = None,
            env: dict[str, str] | None = None, nvtx_include: str | None = NVTX_INCLUDE,
            name: str | None = None, params: dict[str, int] | None = None) -> Collected:
    """Profile ``kernel version`` on ``trial``: writes ``<out_dir>/<trial>.ncu-rep`` and ``<trial>.csv.gz``."""
    what = f"{kernel} {version} on {trial}"
    got = Collected(kernel, version, trial)
    exe = find_ncu(ncu)
    if exe is None:
        got.fault = (f"ncu not found ({ncu or os.environ.get('KFORGE_NCU') or 'ncu'!r}); install Nsight Compute "
                     f"and put ncu on PATH, or pass --kforge-ncu /path/to/ncu")
        return got
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = name or trial
    rep = out / f"{stem}.ncu-rep"
    names = list(metrics) if metrics else ncu_metric_names(available=available)
    app = driver_command(kernel, version, trial, kernels_dir=kernels_dir, warmup=warmup, params=params)
    cmd = profile_command(app, out=rep, metrics=names, ncu=exe, launch_count=launch_count, nvtx_include=nvtx_include)
    got.command = cmd
    if rep.exists():
        rep.unlink()  # never read a stale report after a failed run
    res = run_command(cmd, timeout_s=timeout_s, cwd=cwd, env=env if env is not None else _child_env())
    got.wall_s = res.wall_s
    got.log = (res.stdout[-4000:] + "\n" + res.stderr[-4000:]).strip()
    got.fault = classify_fault(res, what=what, timeout_s=timeout_s)
    said = driver_lines(res.stdout + "\n" + res.stderr)
    loaded = [ln for ln in said if ln.startswith("loaded:")]
    if loaded:
        got.loaded = [n.strip() for n in loaded[-1][len("loaded:"):].split(",") if n.strip()]
    if got.fault is None and not rep.exists():
        got.fault = (f"ncu finished but wrote no report for {what} (expected {rep}); "
                     f"no kernel matched --nvtx-include {NVTX_INCLUDE!r} or the disk is full")
    if got.fault is not None:
        return got
    got.rep_path = rep
    csv_res = run_command(export_csv_command(rep, ncu=exe), timeout_s=120.0, cwd=cwd, env=env)
    got.wall_s += csv_res.wall_s
    if csv_res.returncode == 0 and csv_res.stdout.strip():
        # gzipped: a report's raw counters are ~10x smaller, which keeps a repository of reports small
        got.csv_path = write_csv_gz(out / f"{stem}.csv.gz", csv_res.stdout)
    else:
        got.fault = (f"ncu could not export {rep} as CSV (exit {csv_res.returncode}: "
                     f"{(csv_res.stderr.strip().splitlines() or [''])[0]}); open it with ncu-ui to check it")
    return got
