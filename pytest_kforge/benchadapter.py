"""The one module that talks to pytest-benchmark: device times in, pytest-benchmark's records out.

pytest-benchmark times a callable with its own timer and has no public call that takes measured times,
so kforge hands it the device times of a trial two ways, both here:

* in a test (:func:`feed_fixture`): the ``benchmark`` fixture runs ``pedantic`` over a target that advances
  a clock by one measured device time per round, that clock put in as the fixture's timer;
* on the xdist controller (:func:`add_to_session`), where the workers' fixtures were disabled: one
  ``Metadata`` record per timed row, appended to the benchmark session before it saves and compares.

So ``--benchmark-autosave``, ``--benchmark-compare`` and ``--benchmark-compare-fail`` work on kernel time in
both.  The two private attributes this needs (the fixture's ``_timer``, ``config._benchmarksession``) are
read nowhere else, and a missing one fails in one sentence naming the pin (``pytest-benchmark>=5,<6``).
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from .results import TrialResult

__all__ = ["feed_fixture", "add_to_session", "entry_for", "extra_info", "update_machine_info", "EXTRA_INFO_KEYS",
           "PIN"]

PIN = "pytest-benchmark>=5,<6"
#: the options a controller-side record claims (it was timed by kforge, not by pytest-benchmark)
_OPTIONS = {"timer": "kforge device timer (CUDA events)", "disable_gc": False, "warmup": False, "min_rounds": 1,
            "max_time": 0, "min_time": 0}


#: the fields of a trial row stored as pytest-benchmark ``extra_info`` (one-process and xdist runs alike)
EXTRA_INFO_KEYS = ("version", "language", "parent", "trial", "id", "correct", "tflops", "gbps", "pct_floor",
                   "floor_us", "median_us", "spread_pct", "host_us", "b2b_us", "b2b_host_us", "params", "note",
                   "clock", "sm_clock_mhz", "clock_events", "clock_retaken", "clock_guard", "clock_note",
                   "sm_clock_witness", "error")


def extra_info(row: TrialResult, *, with_gpu: bool = False) -> dict[str, Any]:
    """A row's ``extra_info``; ``with_gpu`` adds this process's GPU and toolchain (the process that timed it)."""
    data = row.to_json()
    out = {k: data.get(k) for k in EXTRA_INFO_KEYS}
    if with_gpu:
        from .gpuinfo import gpu_identity

        ident = gpu_identity()
        out.update(gpu=ident["gpu"], driver=ident["driver"], torch=ident["torch"], cuda_tile=ident["cuda-tile"],
                   cutlass_dsl=ident["nvidia-cutlass-dsl"])
    return out


def entry_for(result: TrialResult | Mapping[str, Any], kernel: str | None = None,
              test: str | None = None) -> dict[str, Any]:
    """Names, params and samples under which one trial row is stored in pytest-benchmark.

    ``fullname`` is the trial test's node id (``test``, or the row's ``test``), as in a one-process run, so
    files saved by xdist runs and by one-process runs compare with each other.  Samples come from
    ``samples_us``; a row without them is stored with its median as the only sample (``extra_info`` says so).
    """
    row = result if isinstance(result, TrialResult) else TrialResult.from_json(result)
    nodeid = test or row.test
    fullname = str(nodeid) if nodeid else f"kforge::{kernel or 'kernel'}::{row.version}[{row.id}]"
    extra = extra_info(row)
    samples_us = row.samples_us
    if not samples_us:
        if row.median_us is None:
            raise ValueError(f"{row.version} {row.id} was not timed (no median_us); store only timed rows")
        samples_us = [row.median_us]
        extra["kforge_samples"] = "median only: the harness sent no samples_us"
    return {"name": fullname.rsplit("::", 1)[-1], "fullname": fullname, "group": f"{kernel or 'kforge'} {row.id}",
            "param": row.id, "params": dict(row.params), "extra_info": extra,
            "samples_s": [float(x) * 1e-6 for x in samples_us]}


def feed_fixture(benchmark: Any, samples_s: Sequence[float], extra_info: Mapping[str, Any],
                 group: str | None = None) -> None:
    """Record ``samples_s`` (device seconds per round) as the ``benchmark`` fixture's rounds."""
    benchmark.extra_info.update(extra_info)
    if group:
        benchmark.group = group
    if getattr(benchmark, "disabled", False) or not samples_s:
        return
    if not hasattr(benchmark, "_timer"):  # pragma: no cover - guards a future pytest-benchmark
        raise RuntimeError(f"this pytest-benchmark's fixture has no _timer to feed device times through; pin {PIN}")
    pending = iter(samples_s)
    now = [0.0]

    def kforge_device_clock() -> float:
        return now[0]

    def advance_by_one_measured_round() -> None:
        now[0] += next(pending)

    # pytest-benchmark reads the fixture's timer in its runner: start, target(), end.  Our target
    # moves the clock forward by one measured device time, so end - start is exactly that time.
    benchmark._timer = kforge_device_clock
    benchmark.pedantic(advance_by_one_measured_round, rounds=len(samples_s), iterations=1, warmup_rounds=0)


def add_to_session(config: pytest.Config, entries: Sequence[Mapping[str, Any]]) -> int:
    """Append one pytest-benchmark record per entry (``name``, ``fullname``, ``group``, ``param``, ``params``,
    ``extra_info``, ``samples_s``) to this run's benchmark session; returns how many (0: plugin not active)."""
    bs = getattr(config, "_benchmarksession", None)
    if bs is None:
        return 0
    if not hasattr(bs, "benchmarks"):  # pragma: no cover - guards a future pytest-benchmark
        raise RuntimeError(f"this pytest-benchmark's session keeps no benchmarks list to add xdist timings to; "
                           f"pin {PIN}")
    from pytest_benchmark.stats import Metadata

    for entry in entries:
        fixture = types.SimpleNamespace(name=entry["name"], fullname=entry["fullname"], group=entry["group"],
                                        param=entry["param"], params=entry["params"],
                                        extra_info=entry["extra_info"], cprofile_stats=None, has_error=False)
        meta = Metadata(fixture, iterations=1, options={**_OPTIONS, "min_rounds": len(entry["samples_s"])})
        for s in entry["samples_s"]:
            meta.update(s)
        bs.benchmarks.append(meta)
    return len(entries)


def update_machine_info(machine_info: dict[str, Any]) -> None:
    """Add the GPU identity so pytest-benchmark warns when comparing runs from different GPUs."""
    from .gpuinfo import gpu_identity

    ident = gpu_identity()
    machine_info["gpu"] = ident["gpu"] or "none (cpu)"
    machine_info["kforge"] = {k: ident[k] for k in ("gpu", "capability", "driver", "cuda", "torch",
                                                    "cuda-tile", "nvidia-cutlass-dsl")}
