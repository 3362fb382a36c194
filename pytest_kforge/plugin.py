"""The pytest plugin: options (group "kforge"), the ``kforge_session`` fixture and the hooks.

Registered through the ``pytest11`` entry point ``kforge``.  The work lives in the library
modules: :mod:`.config` (settings), :mod:`.session` (selection, inputs, results, JSON),
:mod:`.collect` (the generated tests), :mod:`.correctness`, :mod:`.timing`, :mod:`.bench`.

Note: ``pytest --kernel mla --version v4`` runs nothing: pytest answers a lone ``--version``
before plugins load.  Use ``--kernel-version v4``, ``--kernel mla:v4`` or the ``kforge`` script.
"""

from __future__ import annotations

import argparse
import re
import secrets
from pathlib import Path
from typing import Any

import pytest

from .session import SESSION_KEY, KforgeSession

__all__ = ["SESSION_KEY"]  # defined in .session (collect.py reads it without importing this module)

_NAME = r"[a-z][a-z0-9_]*"
_VERSION = r"v\d+(?:_[a-z0-9_]+)?"
#: the header's roofline phrase: the figures and where they came from (pytest_kforge.calibrate.roofline_for)
_ROOFLINE_KEY = pytest.StashKey[str]()


# ---- validators: each error says what is wrong and what is expected ---------------------------------
def _kernel(value: str) -> str:
    if not re.fullmatch(rf"{_NAME}(?::{_VERSION}(?:,{_VERSION})*|:all)?", value):
        raise argparse.ArgumentTypeError(
            f"expected a kernel name like 'mla' or name:version like 'mla:v4', got {value!r}")
    return value


def _versions(value: str) -> str:
    items = [v.strip() for v in value.split(",")]
    if not all(re.fullmatch(_VERSION, v) or v == "all" for v in items):
        raise argparse.ArgumentTypeError(
            f"expected versions like 'v4', 'v4,v5' or 'all', got {value!r}")
    return ",".join(items)


def _trials(value: str) -> str:
    items = [v.strip() for v in value.split(",")]
    if not all(re.fullmatch(_NAME, v) for v in items):
        raise argparse.ArgumentTypeError(f"expected trial names like 'decode' or 'decode,spec', got {value!r}")
    return ",".join(items)


def _device(value: str) -> str:
    if not re.fullmatch(r"auto|cpu|cuda(?::\d+)?", value):
        raise argparse.ArgumentTypeError(f"expected 'auto', 'cpu', 'cuda' or 'cuda:N', got {value!r}")
    return value


def _int_at_least(low: int) -> Any:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = low - 1
        if n < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value!r}")
        return n

    parse.__name__ = f"int>={low}"
    return parse


def _guard_pct(value: str) -> float:
    try:
        pct = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--kforge-clock-guard {value!r} is not a number; give a percentage "
                                         f"like 99, or 0 to turn the guard off") from None
    if not 0 <= pct < 100:
        raise argparse.ArgumentTypeError(f"--kforge-clock-guard {value!r} must be from 0 (off) to below 100 "
                                         f"(% of the GPU's maximum SM clock)")
    return pct


def _witness_ms(value: str) -> float:
    try:
        ms = float(value)
    except ValueError:
        ms = -1.0
    if not 0 <= ms <= 1000:
        raise argparse.ArgumentTypeError(f"--kforge-clock-witness {value!r} must be a number of milliseconds from 0 "
                                         f"(off) to 1000, like 50")
    return ms


def _positive_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not x > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return x


# ---- registration --------------------------------------------------------------------------------
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kforge", "kforge: optimise a GPU kernel version by version (pytest-kforge)")
    g.addoption("--kernel", metavar="NAME[:VERSION]", type=_kernel, default=None,
                help="run the kforge suite of kernel NAME (kernels/NAME/); NAME:v4 picks a version. "
                     "Note: `--version v4` does NOT work (pytest takes it), use --kernel-version or `kforge`.")
    g.addoption("--kernel-version", metavar="V[,V|all]", type=_versions, default=None,
                help="versions to run: v4, v4,v5 or all (default: all)")
    g.addoption("--trial", metavar="NAME[,NAME]", type=_trials, default=None,
                help="trial configs, e.g. decode,spec[,stress] (default: the spec's or [tool.kforge] trials)")
    g.addoption("--kforge-device", metavar="auto|cpu|cuda[:N]", type=_device, default="auto",
                help="where to run (default auto: cuda if available); cpu times with perf_counter, NOT device time")
    g.addoption("--kforge-rounds", metavar="N", type=_int_at_least(1), default=None,
                help="timed rounds per trial config, median reported (default 100 or [tool.kforge] rounds)")
    g.addoption("--kforge-warmup", metavar="N", type=_int_at_least(0), default=None,
                help="untimed launches before timing (default 10 or [tool.kforge] warmup)")
    g.addoption("--kforge-clock-guard", metavar="PCT", type=_guard_pct, default=None,
                help="re-take a timed round the GPU ran throttled (power/thermal) below PCT%% of its maximum SM "
                     "clock (default 99 or [tool.kforge] clock_guard_pct; 0: off)")
    g.addoption("--kforge-clock-witness", metavar="MS", type=_witness_ms, default=None,
                help="after timing a trial, count the SM clock inside an MS-millisecond burst of it with a spin "
                     "kernel (NVML can report the boost clock while the SMs run slower; default 50 or "
                     "[tool.kforge] clock_witness_ms; 0: off)")
    g.addoption("--kforge-seed", metavar="N", type=_int_at_least(0), default=None,
                help="input seed (default: fresh random each run, printed in the header)")
    g.addoption("--kforge-json", metavar="PATH", type=Path, default=None,
                help="write the suite's results JSON to PATH")
    g.addoption("--kforge-peak-tbs", metavar="TB/S", type=_positive_float, default=None,
                help="roofline memory bandwidth (default: [tool.kforge] peak_bandwidth_tbs, else this GPU's "
                     "calibration, python -m pytest_kforge.calibrate, else the H200's 4.3)")
    g.addoption("--kforge-peak-tflops", metavar="TFLOP/S", type=_positive_float, default=None,
                help="roofline compute peak (default: [tool.kforge] peak_tflops, else this GPU's calibration, "
                     "else the H200's 790)")
    g.addoption("--kforge-no-bench", action="store_true", default=False,
                help="correctness only: do not collect the trial benchmarks")
    g.addoption("--kforge-examples", metavar="N", type=_int_at_least(1), default=None,
                help="hypothesis max_examples of the fuzz tests (default 25 or [tool.kforge] fuzz_examples)")


# ---- configure: build the session, add the generated tests -------------------------------------------
def _resolve_device(choice: str) -> str:
    import torch

    from .errors import NoGPUError

    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise pytest.UsageError(str(NoGPUError(f"--kforge-device {choice}")))
    return choice


def _default_examples(cfg: Any, device: str) -> int:
    """The configured count, else 25 on a GPU and 10 on CPU (where the float64 reference is slow)."""
    if cfg.fuzz_examples is not None:
        return int(cfg.fuzz_examples)
    return 25 if str(device).startswith("cuda") else 10


def pytest_configure(config: pytest.Config) -> None:
    from .calibrate import device_name, roofline_for
    from .config import load_config
    from .errors import KforgeError
    from .session import select

    for line in ("kforge_correctness: a kforge correctness test", "kforge_trial: a kforge trial benchmark",
                 "gpu: needs a CUDA GPU (skipped with a reason on CPU)"):
        config.addinivalue_line("markers", line)
    opt = config.option
    kernel_arg = getattr(opt, "kernel", None)
    try:
        cfg = load_config(config.rootpath)
        selection = None
        if kernel_arg:
            selection = select(cfg, kernel_arg, opt.kernel_version, opt.trial)
            config.hook.pytest_kforge_select_trials(config=config, kernel=selection.kernel.name,
                                                    trials=selection.trials)
        elif opt.kernel_version or opt.trial:
            raise KforgeError("--kernel-version/--trial need --kernel NAME (e.g. --kernel mla --kernel-version v4)")
    except KforgeError as exc:
        raise pytest.UsageError(str(exc)) from None
    workerinput = getattr(config, "workerinput", {})
    seed = opt.kforge_seed if opt.kforge_seed is not None else workerinput.get("kforge_seed")
    seed = seed if seed is not None else secrets.randbelow(2**31)
    device = _resolve_device(opt.kforge_device) if selection else opt.kforge_device
    try:  # per-GPU ceilings (pytest_kforge.calibrate); a CPU run looks nothing up
        roofline, roofline_line = roofline_for(device_name(device) if selection else None, cfg,
                                               (opt.kforge_peak_tbs, opt.kforge_peak_tflops))
    except KforgeError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_ROOFLINE_KEY] = roofline_line
    ks = KforgeSession(
        cfg, selection, seed=int(seed), device=device, device_explicit=opt.kforge_device != "auto",
        rounds=opt.kforge_rounds or cfg.rounds,
        warmup=opt.kforge_warmup if opt.kforge_warmup is not None else cfg.warmup,
        clock_guard_pct=opt.kforge_clock_guard if opt.kforge_clock_guard is not None else cfg.clock_guard_pct,
        clock_witness_ms=(opt.kforge_clock_witness if opt.kforge_clock_witness is not None
                          else cfg.clock_witness_ms),
        roofline=roofline,
        fuzz_examples=opt.kforge_examples or _default_examples(cfg, device),
        bench=not opt.kforge_no_bench, json_path=opt.kforge_json,
    )
    config.stash[SESSION_KEY] = ks
    if selection is not None:
        config.pluginmanager.register(_RunHooks(config, ks), f"kforge-run-{id(config)}")
        from . import collect

        suite = str(Path(collect.__file__).resolve())
        # with only testpaths / the invocation dir as arguments, run just the kernel's suite
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args = [suite]
        elif suite not in config.args:
            config.args = [*config.args, suite]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: give every worker the controller's seed so one seed reproduces the run."""
    ks = node.config.stash.get(SESSION_KEY, None)
    if ks is not None:
        node.workerinput["kforge_seed"] = ks.seed


def _guard_text(ks: KforgeSession) -> str:
    """The header's word on the clock guard: it acts only on a GPU whose clock NVML reads."""
    if not ks.clock_guard_pct:
        return "off"
    if not ks.on_gpu:
        return "off (cpu)"
    return f"{ks.clock_guard_pct:g}% of the max SM clock (via NVML; rows without sm_clock_mhz had none)"


def pytest_report_header(config: pytest.Config) -> list[str]:
    ks = config.stash.get(SESSION_KEY, None)
    if ks is None or ks.selection is None:
        return []
    sel = ks.selection
    where = ks.device
    if ks.on_gpu:
        from .gpuinfo import gpu_name

        where += f" ({gpu_name()})"
    return [
        f"kforge: kernel {sel.kernel.name}, versions {', '.join(v.name for v in sel.versions)}, "
        f"trials {', '.join(t.id for t in sel.trials)}, device {where}",
        f"kforge: seed {ks.seed} (reproduce with --kforge-seed {ks.seed}); rounds {ks.rounds}, "
        f"warm-up {ks.warmup}; clock guard {_guard_text(ks)}; {config.stash.get(_ROOFLINE_KEY, 'roofline ?')}",
    ]


@pytest.fixture(scope="session")
def kforge_session(pytestconfig: pytest.Config) -> KforgeSession:
    """The run's :class:`~pytest_kforge.session.KforgeSession` (selection, inputs, results)."""
    return pytestconfig.stash[SESSION_KEY]


# ---- results -------------------------------------------------------------------------------------
def _kind_from_nodeid(nodeid: str, ks: KforgeSession) -> tuple[str, str] | None:
    """(kind, version) from ``...::test_<kind>[<kernel>-<version>...]``: under pytest-xdist the
    controller sees reports of items it never collected.  Kernel and version names hold no '-'."""
    name = nodeid.rpartition("::")[2]
    kind, _, rest = name.partition("[")
    parts = rest.rstrip("]").split("-")
    kind = kind.removeprefix("test_")
    if kind in ("correctness", "fuzz", "trial") and len(parts) >= 2 and ks.selection is not None \
            and parts[0] == ks.selection.kernel.name:
        return kind, parts[1]
    return None


class _RunHooks:
    """Per-run hooks, registered only when ``--kernel`` is given (bound to this run's config)."""

    def __init__(self, config: pytest.Config, ks: KforgeSession) -> None:
        self.config = config
        self.ks = ks

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        keep, dropped = [], []
        for item in items:
            callspec = getattr(item, "callspec", None)
            case = callspec.params.get("kforge_case") if callspec else None
            kind = item.originalname.removeprefix("test_") if isinstance(item, pytest.Function) else ""
            if callspec is not None and "kforge_case" in callspec.params and not isinstance(case, tuple):
                dropped.append(item)  # an empty selection (e.g. --kforge-no-bench), not a skip
                continue
            if case is not None and kind in ("correctness", "fuzz", "trial"):
                self.ks.kinds[item.nodeid] = (kind, case[0].name)
            keep.append(item)
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        found = self.ks.kinds.get(report.nodeid) or _kind_from_nodeid(report.nodeid, self.ks)
        if found is None or (report.when != "call" and not (report.skipped or report.failed)):
            return
        kind, version = found
        reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        self.ks.count(kind, report.outcome, reason)
        if kind in ("correctness", "fuzz") and not report.skipped:
            message = "" if report.passed else (report.longreprtext.strip().splitlines() or [""])[-1]
            self.ks.add_correctness(version, report.nodeid, report.passed, message)
            self.config.hook.pytest_kforge_correctness_result(
                config=self.config, version=version, nodeid=report.nodeid, passed=report.passed, message=message)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.ks.json_path is None or hasattr(self.config, "workerinput"):
            return
        payload = self.ks.payload()
        self.config.hook.pytest_kforge_write_json(config=self.config, session=self.ks, payload=payload)
        self.ks.write_json(payload)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(self.ks.summary_line())
        if self.ks.json_path is not None:
            terminalreporter.write_line(f"kforge: results JSON written to {self.ks.json_path}")


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    from .benchadapter import update_machine_info

    update_machine_info(machine_info)
