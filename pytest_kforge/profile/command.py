"""Building the ncu command lines (pure functions, unit-tested on CPU).

The profiled program is the small driver (:mod:`pytest_kforge.profile.driver`): it builds the
inputs once, warms the version up outside any NVTX range, then launches it once inside the
push/pop range ``kforge``.  ncu replays only the kernels launched inside that range
(``--nvtx --nvtx-include kforge/``: a push/pop range name must end in ``/``), at most
``launch_count`` of them, collecting only the bounded metric set of :mod:`.metrics`.

``--clock-control none`` is always passed and cannot be overridden: kforge never changes the
GPU's clocks, so the profiled durations match what the benchmarks measure.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "NVTX_RANGE",
    "NVTX_INCLUDE",
    "DEFAULT_LAUNCH_COUNT",
    "driver_command",
    "profile_command",
    "export_csv_command",
    "query_metrics_command",
]

#: the push/pop NVTX range the driver opens around the one profiled call
NVTX_RANGE = "kforge"
NVTX_INCLUDE = NVTX_RANGE + "/"
#: upper bound on replayed kernels per trial (a torch baseline launches ~10-20 kernels)
DEFAULT_LAUNCH_COUNT = 64

_FORBIDDEN = ("--clock-control", "--set", "--section", "--target-processes", "-o", "--export")


def driver_command(kernel: str, version: str, trial: str, *, kernels_dir: str | Path | None = None,
                   warmup: int = 3, seed: int = 0, python: str | None = None, time_n: int = 0,
                   params: dict[str, int] | None = None) -> list[str]:
    """The python command that runs one version on one trial config once inside the range
    (or, with ``time_n``, times it with CUDA events instead; run that one without ncu)."""
    cmd = [python or sys.executable, "-m", "pytest_kforge.profile.driver",
           "--kernel", kernel, "--version", version, "--trial", trial,
           "--warmup", str(int(warmup)), "--seed", str(int(seed))]
    if params:
        cmd += ["--params", ",".join(f"{k}={int(v)}" for k, v in params.items())]
    if time_n:
        cmd += ["--time", str(int(time_n))]
    if kernels_dir is not None:
        cmd += ["--kernels-dir", str(kernels_dir)]
    return cmd


def profile_command(app: Sequence[str], *, out: str | Path, metrics: Sequence[str], ncu: str = "ncu",
                    nvtx_include: str | None = NVTX_INCLUDE, launch_count: int = DEFAULT_LAUNCH_COUNT,
                    extra: Sequence[str] = ()) -> list[str]:
    """``ncu ... --export OUT app...``; ``out`` is the report path with or without ``.ncu-rep``.

    ``nvtx_include=None`` drops the NVTX filter (diagnostics only: warm-up launches get profiled too).
    """
    if not metrics:
        raise ValueError("profile_command needs at least one metric; pass names from pytest_kforge.profile.metrics")
    if launch_count < 1:
        raise ValueError(f"launch_count must be >= 1 (got {launch_count})")
    for arg in extra:
        if arg.split("=")[0] in _FORBIDDEN:
            raise ValueError(f"extra ncu argument {arg!r} is set by kforge itself; remove it "
                             f"(clocks are never changed and the metric set is fixed in pytest_kforge.profile.metrics)")
    out = str(out)
    if out.endswith(".ncu-rep"):
        out = out[: -len(".ncu-rep")]
    return [
        ncu,
        "--target-processes", "all",
        "--clock-control", "none",
        "--cache-control", "all",
        "--replay-mode", "kernel",
        *(("--nvtx", "--nvtx-include", nvtx_include) if nvtx_include else ()),
        "--launch-count", str(int(launch_count)),
        "--metrics", ",".join(metrics),
        *extra,
        "--force-overwrite", "--export", out,
        *app,
    ]


def export_csv_command(report: str | Path, *, ncu: str = "ncu") -> list[str]:
    """Print the raw page of a ``.ncu-rep`` as CSV (header row, units row, one row per kernel)."""
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


def query_metrics_command(*, ncu: str = "ncu", chip: str | None = None, mode: str | None = None,
                          metrics: Sequence[str] = ()) -> list[str]:
    """``ncu --query-metrics`` (for the device here, or ``chip`` such as ``gh100``)."""
    cmd = [ncu, "--query-metrics"]
    if chip:
        cmd += ["--chips", chip]
    if mode:
        cmd += ["--query-metrics-mode", mode]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd
