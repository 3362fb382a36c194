"""pytest-xdist integration: workers pinned to GPUs, kforge timings merged on the controller.

Enable with ``pytest -n auto`` (one worker per GPU) or ``-n N``; the plugin is the pytest11
entry point ``kforge_xdist``.  What it does:

* **GPU count** (:func:`detect_gpus`): ``--kforge-gpus`` (a count ``N`` = the first N visible GPUs,
  or ids ``0,2,3``), else ``$KFORGE_GPUS`` (same syntax), else ``$CUDA_VISIBLE_DEVICES``, else
  ``torch.cuda.device_count()``.  ``-n auto`` becomes that count times ``K``
  (``--kforge-workers-per-gpu K``, else ``$KFORGE_WORKERS_PER_GPU``, default 1).  More workers
  than GPUs x K is a usage error.  No GPU at all: workers run unpinned (CPU).
* **Pinning**: when xdist has started a worker process, and before pytest runs in it, the
  controller sets that process's ``CUDA_VISIBLE_DEVICES`` to a GPU with a free slot, round-robin,
  at most K workers per GPU (``pytest_xdist_newgateway`` + a one-line ``remote_exec``, which also
  sets ``$KFORGE_XDIST_GPU`` and ``$KFORGE_XDIST_SHARE`` = K, and ``$OMP_NUM_THREADS`` to the cores
  divided among the workers unless it is set), so no plugin, conftest or test can see another GPU.  A
  crashed worker's slot goes to its replacement.
* **Exclusive GPU use**: with K = 1 each worker has its GPU to itself and nothing is locked.
  With K > 1 the core harness runs each GPU section (correctness checks, fuzz examples, a whole
  trial: inputs, warm-up, timing, stream audit, re-check) under :func:`gpu_lock`, the GPU's file
  lock, after compiling outside it (:func:`pytest_kforge.gpushare.gpu_section`): compiles run in
  parallel, GPU use and timing stay exclusive.  ``--kforge-profile`` runs ncu on the controller
  after every worker has finished, so it never overlaps a worker (it takes no lock).
* **Results**: pytest-benchmark disables itself under xdist, so each worker sends its kforge
  results (the core session's ``results`` / ``correctness`` lists, see :func:`kforge_store`) in
  ``config.workeroutput``; the controller merges them in collection order (what one process
  would have produced), puts them back into its own store, writes ``--kforge-json``, and hands
  pytest-benchmark one entry per timed result (stats from the device samples), so
  ``--benchmark-autosave`` / ``--benchmark-save`` / ``--benchmark-json`` / ``--benchmark-compare``
  work as in a one-process run.
* :func:`parallel_args` gives the orchestrator's sweeps and VERIFY steps the same mechanism.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import pytest

from .benchadapter import add_to_session
from .benchadapter import entry_for as benchmark_entry
from .gpushare import ENV_PINNED, ENV_SHARE, gpu_lock, section_summary, visible_ids

__all__ = ["detect_gpus", "parallel_args", "gpu_lock", "kforge_store", "benchmark_entry",
           "ENV_OVERRIDE", "ENV_PINNED", "ENV_SHARE", "OUTPUT_KEY"]

ENV_OVERRIDE = "KFORGE_GPUS"  # user override of detection (same syntax as --kforge-gpus)
ENV_WORKERS_PER_GPU = "KFORGE_WORKERS_PER_GPU"  # user default of --kforge-workers-per-gpu
_PIN_SOURCE = ("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = {gpu!r}\nos.environ[{env!r}] = {gpu!r}\n"
               "os.environ[{share_env!r}] = {share!r}\nos.environ.setdefault('OMP_NUM_THREADS', {threads!r})\n")
OUTPUT_KEY = "kforge"


# ---- GPUs -------------------------------------------------------------------------------------
def detect_gpus(spec: str | None = None) -> list[str]:
    """The GPU ids workers are pinned to, in worker order (see the module docstring)."""
    spec = (spec or os.environ.get(ENV_OVERRIDE) or "").strip()
    visible = visible_ids()
    if spec:
        if spec.isdigit():
            n = int(spec)
            if visible is None:
                return [str(i) for i in range(n)]
            if n > len(visible):
                raise pytest.UsageError(f"--kforge-gpus {n} asks for {n} GPUs but CUDA_VISIBLE_DEVICES lists "
                                        f"{len(visible)} ({','.join(visible)}); ask for at most {len(visible)}")
            return visible[:n]
        ids = [x.strip() for x in spec.split(",") if x.strip()]
        if not ids or any(not re.fullmatch(r"[A-Za-z0-9:_-]+", x) for x in ids):
            raise pytest.UsageError(f"--kforge-gpus {spec!r} is neither a count nor a comma-separated list of "
                                    f"GPU ids; write e.g. 2 or 0,1,3")
        return ids
    if visible == []:
        return []  # CUDA_VISIBLE_DEVICES="" or -1: no GPU, and no need to import torch to know it
    try:
        import torch

        count = torch.cuda.device_count()  # NVML-based: does not initialise CUDA here
    except Exception:  # noqa: BLE001 - no torch / no driver: no GPUs
        count = 0
    if visible is not None:
        return visible[:count] if count else []
    return [str(i) for i in range(count)]


def parallel_args(n_gpus: int) -> list[str]:
    """pytest arguments that spread a run over ``n_gpus`` GPUs (none for 0 or 1)."""
    return [] if n_gpus <= 1 else ["-n", str(n_gpus), "--kforge-gpus", str(n_gpus)]


# ---- the seam with the core harness ----------------------------------------------------------
def kforge_store(config: pytest.Config) -> tuple[list[Any], list[Any], Any]:
    """``(results, correctness, session)``: the lists the core harness appends to, by reference.

    The one place that knows where the core keeps them: the run's ``KforgeSession``
    (``config.stash[SESSION_KEY]``, typed records of :mod:`pytest_kforge.results`); without one (a run
    with no ``--kernel``), ``config._kforge_results`` / ``config._kforge_correctness`` (created empty;
    simple harnesses append results-JSON dicts there; ``config._kforge_meta`` holds the top-level fields).
    """
    from .session import SESSION_KEY

    session = config.stash.get(SESSION_KEY, None)
    if session is not None and session.selection is not None:
        return session.results, session.correctness, session
    return _attr_list(config, "_kforge_results"), _attr_list(config, "_kforge_correctness"), None


def _as_json(rec: Any) -> dict[str, Any]:
    """A stored record as its results-JSON dict (typed records and plain dicts alike)."""
    return rec.to_json() if hasattr(rec, "to_json") else dict(rec)


def _field(rec: Any, key: str) -> Any:
    return rec.get(key) if isinstance(rec, Mapping) else getattr(rec, key, None)


def _attr_list(config: pytest.Config, name: str) -> list[dict[str, Any]]:
    if not isinstance(getattr(config, name, None), list):
        setattr(config, name, [])
    return getattr(config, name)


def _meta(config: pytest.Config, session: Any) -> dict[str, Any]:
    if session is not None:
        meta = dict(session.payload())
    else:
        meta = dict(getattr(config, "_kforge_meta", None) or {})
    meta.pop("results", None)
    meta.pop("correctness", None)
    return meta


# ---- worker side -----------------------------------------------------------------------------
def _pin_worker() -> str | None:
    """On an xdist worker: make sure CUDA_VISIBLE_DEVICES is the GPU the controller assigned."""
    gpu = os.environ.get(ENV_PINNED)
    if not gpu or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    if os.environ.get("CUDA_VISIBLE_DEVICES") != gpu:
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            raise pytest.UsageError(f"xdist worker {os.environ['PYTEST_XDIST_WORKER']}: CUDA was initialised with "
                                    f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r} instead of "
                                    f"its GPU {gpu}; do not change CUDA_VISIBLE_DEVICES in a plugin or conftest")
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return gpu


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: Any, args: list[str]) -> None:
    _pin_worker()  # before conftests are imported


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kforge-xdist", "kforge: spread runs over GPUs with pytest-xdist")
    group.addoption("--kforge-gpus", default=None, metavar="N|IDS",
                    help="GPUs for xdist workers: a count (the first N visible) or ids like 0,2,3; "
                         "default: $KFORGE_GPUS, $CUDA_VISIBLE_DEVICES, else all GPUs torch sees")
    from .plugin import _int_at_least

    group.addoption("--kforge-workers-per-gpu", metavar="K", type=_int_at_least(1),
                    default=os.environ.get(ENV_WORKERS_PER_GPU) or "1",  # argparse checks it like a value
                    help="xdist workers per GPU (default: $KFORGE_WORKERS_PER_GPU, else 1); with K > 1 they "
                         "compile in parallel and take turns on the GPU (a file lock per GPU)")


def _workers_per_gpu(config: pytest.Config) -> int:
    return int(config.getoption("kforge_workers_per_gpu", None) or 1)


def _n_workers(config: pytest.Config) -> int:
    n = config.getoption("numprocesses", None)
    if isinstance(n, int):
        return n
    total = 0
    for tx in config.getoption("tx", None) or []:
        m = re.match(r"(\d+)\*", tx)
        total += int(m.group(1)) if m else 1
    return total


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    gpus = detect_gpus(config.getoption("kforge_gpus", None))
    return len(gpus) * _workers_per_gpu(config) or None  # no GPU: xdist's own CPU-based default


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        _pin_worker()  # no-op when already pinned; catches a plugin registered after start-up
        config.pluginmanager.register(_Worker(config), "kforge-xdist-worker")
        return
    n = _n_workers(config)
    if n <= 0:
        return
    gpus = detect_gpus(config.getoption("kforge_gpus", None))
    k = _workers_per_gpu(config)
    if gpus and n > len(gpus) * k:
        per = f"at most {k} workers per GPU (--kforge-workers-per-gpu {k})"
        share = "raise --kforge-workers-per-gpu"
        if k == 1:
            per = "one worker per GPU"
            share = ("let K workers share each GPU with --kforge-workers-per-gpu K (they compile in parallel "
                     "and take turns on the GPU)")
        raise pytest.UsageError(f"-n {n} starts {n} xdist workers but only {len(gpus)} GPU(s) are available "
                                f"({','.join(gpus)}) and kforge pins {per}; use -n {len(gpus) * k} (or -n auto), "
                                f"list more GPUs with --kforge-gpus, or {share}")
    config.pluginmanager.register(_Controller(config, gpus, k), "kforge-xdist-controller")


class _Worker:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tests: list[str | None] = []  # node id of each trial result, in the order they were stored

    @pytest.hookimpl(optionalhook=True)
    def pytest_kforge_trial_result(self, config: pytest.Config, version: Any, trial: Any,
                                   result: dict[str, Any]) -> None:
        current = os.environ.get("PYTEST_CURRENT_TEST", "")  # "<nodeid> (call)"
        self.tests.append(current.rsplit(" (", 1)[0] or None)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        results, correctness, session = kforge_store(self.config)
        tests = self.tests if len(self.tests) == len(results) else [_field(r, "test") for r in results]
        payload = {"results": [_as_json(r) for r in results], "tests": tests,
                   "correctness": [_as_json(c) for c in correctness],
                   "meta": _meta(self.config, session), "gpu": os.environ.get(ENV_PINNED),
                   "sections": section_summary()}
        self.config.workeroutput[OUTPUT_KEY] = json.dumps(payload, default=str)  # type: ignore[attr-defined]


# ---- controller side -------------------------------------------------------------------------
class _Controller:
    def __init__(self, config: pytest.Config, gpus: list[str], per_gpu: int = 1) -> None:
        self.config = config
        self.gpus = gpus
        self.per_gpu = per_gpu  # K: workers pinned to one GPU at most
        self.order: dict[str, int] = {}
        self.meta: dict[str, Any] = {}
        self.workers: dict[str, dict[str, Any]] = {}
        self.assigned: dict[str, str] = {}  # live worker id -> GPU
        self.test_of: dict[int, str | None] = {}  # id(result dict) -> node id of its trial test

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        """Pin the new worker process to the least used GPU with a free slot, before pytest starts in it."""
        if not self.gpus:
            return
        load = {g: 0 for g in self.gpus}
        for g in self.assigned.values():
            load[g] += 1
        free = [g for g in self.gpus if load[g] < self.per_gpu]
        if not free:  # cannot happen with -n <= GPUs x K (checked in pytest_configure)
            raise RuntimeError(f"kforge-xdist: no free GPU slot for worker {gateway.id}: all of "
                               f"{','.join(self.gpus)} have {self.per_gpu} worker(s)")
        gpu = min(free, key=lambda g: load[g])  # round-robin: first the GPUs with fewest workers
        self.assigned[gateway.id] = gpu
        gateway.remote_exec(_PIN_SOURCE.format(gpu=gpu, env=ENV_PINNED, share_env=ENV_SHARE,
                                               share=str(self.per_gpu), threads=str(self.threads))).waitclose()

    @property
    def threads(self) -> int:
        """torch's CPU threads per worker (``$OMP_NUM_THREADS`` unless the user set it): the cores split
        between the workers, so the host-side work of K-1 workers (inputs drawn on the host, compiles)
        does not starve the launch thread of the one timing on the GPU."""
        return max(1, (os.cpu_count() or 1) // max(1, len(self.gpus) * self.per_gpu))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["kforge_gpu"] = self.assigned.get(node.gateway.id)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.order:
            self.order = {nid: i for i, nid in enumerate(ids)}

    def _sort_key(self, rec: Any) -> tuple[int, str, str, str]:
        nid = str(_field(rec, "test") or self.test_of.get(id(rec)) or "")
        return (self.order.get(nid, len(self.order)), nid, str(_field(rec, "version")), str(_field(rec, "id")))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        raw = (getattr(node, "workeroutput", None) or {}).get(OUTPUT_KEY)
        wid = node.workerinput["workerid"]
        self.assigned.pop(node.gateway.id, None)  # free the GPU (a crashed worker's replacement takes it)
        if raw is None:
            self.workers[wid] = {"gpu": node.workerinput.get("kforge_gpu"), "results": 0, "error": str(error or
                                 "the worker sent no kforge results (crashed?)")}
            return
        payload = json.loads(raw)
        results, correctness, session = kforge_store(self.config)
        if session is not None:  # the core keeps typed records (pytest_kforge.results)
            from .results import CorrectnessRecord, TrialResult

            payload["results"] = [TrialResult.from_json(r) for r in payload["results"]]
            payload["correctness"] = [CorrectnessRecord.from_json(c) for c in payload["correctness"]]
        tests = payload.get("tests") or [None] * len(payload["results"])
        self.test_of.update((id(rec), nid) for rec, nid in zip(payload["results"], tests))
        results.extend(payload["results"])
        # the core records correctness from test reports, which xdist also replays on the controller:
        # keep one record per test
        have = {_field(rec, "test") for rec in correctness}
        correctness.extend(rec for rec in payload["correctness"] if _field(rec, "test") not in have)
        results.sort(key=self._sort_key)  # in place: the core's lists are shared by reference
        correctness.sort(key=self._sort_key)
        for key, val in payload["meta"].items():
            if key == "started" and val:
                self.meta[key] = min(val, self.meta.get(key) or val)  # ISO strings sort in time order
            else:
                self.meta.setdefault(key, val)
        self.workers[wid] = {"gpu": payload.get("gpu"), "results": len(payload["results"]),
                             "correctness": len(payload["correctness"])}
        if (payload.get("sections") or {}).get("sections"):
            self.workers[wid]["gpu_sections"] = payload["sections"]
        self._feed_benchmark(payload["results"])

    def _feed_benchmark(self, results: list[Any]) -> None:
        """Give pytest-benchmark the timings before its own sessionfinish saves/compares them."""
        timed = [r for r in results if _field(r, "median_us") is not None]  # as in one process: not the untimed
        add_to_session(self.config, [benchmark_entry(r, self.meta.get("kernel"), self.test_of.get(id(r)))
                                     for r in timed])

    @pytest.hookimpl(optionalhook=True)
    def pytest_kforge_write_json(self, config: pytest.Config, session: Any, payload: dict[str, Any]) -> None:
        """The core writes ``--kforge-json`` on the controller; its lists already hold the merge."""
        payload["workers"] = self.workers
        if self.meta.get("gpu") and not payload.get("gpu"):
            payload["gpu"] = self.meta["gpu"]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        results, correctness, session = kforge_store(self.config)
        if session is not None:
            return  # the core's own sessionfinish wrote the JSON (see pytest_kforge_write_json)
        payload = {**_meta(self.config, session), **{k: v for k, v in self.meta.items() if v is not None}}
        payload.update(results=[_as_json(r) for r in results], correctness=[_as_json(c) for c in correctness],
                       workers=self.workers)
        path = self.config.getoption("kforge_json", None)
        if path:
            from .fsutil import atomic_write_text

            atomic_write_text(path, json.dumps(payload, indent=2, default=str) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        results, correctness, _ = kforge_store(self.config)
        pins = ", ".join(f"{w}->GPU {d.get('gpu')}" for w, d in sorted(self.workers.items()))
        terminalreporter.write_line(
            f"kforge-xdist: merged {len(results)} timings and {len(correctness)} correctness records from "
            f"{len(self.workers)} workers ({pins or 'none'}); pytest-benchmark's 'disabled under xdist' "
            f"warning does not apply to them")
        if self.per_gpu > 1 and self.gpus:
            n = len(self.workers) or _n_workers(self.config)
            used = len({d.get("gpu") for d in self.workers.values()} - {None}) or len(self.gpus)
            terminalreporter.write_line(
                f"kforge-xdist: {n} workers sharing {used} GPU{'s' if used != 1 else ''} (K={self.per_gpu}): "
                f"GPU sections serialised by a file lock per GPU, compiles in parallel")
            line = _sections_line(self.workers)
            if line:
                terminalreporter.write_line(line)


def _sections_line(workers: Mapping[str, Mapping[str, Any]]) -> str:
    """One line on where the shared workers' time went (summed over workers), or "" when none shared a GPU."""
    secs = [w["gpu_sections"] for w in workers.values() if w.get("gpu_sections")]
    if not secs:
        return ""
    tot = {k: sum(float(s.get(k) or 0) for s in secs) for k in ("sections", "prepare_s", "wait_s", "held_s")}
    top = max((h for s in secs for h in s.get("longest_holds") or ()), key=lambda h: h["held_s"], default=None)
    return (f"kforge-xdist: {int(tot['sections'])} GPU sections, summed over workers: {tot['prepare_s']:.0f} s "
            f"compiling outside the lock (prepare), {tot['wait_s']:.0f} s waiting for it, {tot['held_s']:.0f} s "
            f"holding it" + (f"; longest hold {top['held_s']:.1f} s ({top['test']})" if top else ""))
