"""VERIFY's runner: the suite and the profiler, each in a subprocess with a time limit.

The suite is the harness itself (``python -m pytest --kernel K --kernel-version P,N --kforge-json
PATH``), so the parent and the new version are measured in one session, on one machine state, and
compared row by row.  The profiler is ``python -m pytest_kforge.profile``.  Both go through
``run_isolated`` (trust part): a hang, crash or illegal memory access fails this version with a
reason and the loop goes on.  Tests substitute any object with the same two methods.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any, Protocol

from ..results import ResultsError, load_results
from . import compat

__all__ = ["DEFAULT_TRIALS", "STRESS_TRIAL_OPTION", "SuiteOutcome", "SuiteRunner", "PytestSuiteRunner",
           "find_profile_reports", "oom_notes", "contract_from_report"]

DEFAULT_TRIALS: tuple[str, ...] = ("decode", "spec")
#: harness option that selects trial configs by name (only passed when a stress config is wanted)
STRESS_TRIAL_OPTION = "--trial"


@dataclasses.dataclass
class SuiteOutcome:
    ok: bool
    results: dict[str, Any] | None
    reason: str
    command: str
    wall_s: float = 0.0
    reports: dict[str, Any] = dataclasses.field(default_factory=dict)  # trial -> ProfileContract JSON

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class SuiteRunner(Protocol):
    def run_suite(self, kernel: str, versions: list[str], *, out_json: Path, timeout_s: float,
                  trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome: ...

    def profile(self, kernel: str, version: str, *, out_dir: Path, timeout_s: float,
                trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome: ...


def oom_notes(results: dict[str, Any] | None) -> list[str]:
    """The harness's notes on its rows (e.g. "b halved from 32 to 16: out of GPU memory")."""
    if not results:
        return []
    return [f"{r.get('version')} {r.get('trial')}: {r['note']}" for r in results.get("results", []) if r.get("note")]


def contract_from_report(data: dict[str, Any]) -> Any:
    """The ProfileContract of a report JSON twin (``{"contract": {...}, "metrics": {...}}`` or a bare
    contract dict), with the raw ncu metrics attached as ``.metrics`` when the report has them."""
    c = compat.contracts.ProfileContract.from_dict(data.get("contract", data))
    raw = data.get("metrics")
    if isinstance(raw, dict):
        c.metrics = {k: float(v) for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return c


def find_profile_reports(out_dir: Path, kernel: str, version: str, trials: tuple[str, ...]) -> dict[str, Any]:
    """``<out>/<kernel>/<version>/<trial>.json[.gz]`` (or ``<out>/<trial>.json[.gz]``), keyed by trial."""
    from pytest_kforge.profile.report import load_report_json, report_json_path

    found: dict[str, Any] = {}
    for trial in trials:
        for cand in (out_dir / kernel / version, out_dir):
            data = load_report_json(report_json_path(cand, trial))
            if data is not None:
                found[trial] = data
                break
    return found


def _tail(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


class PytestSuiteRunner:
    """Runs the real harness in a subprocess through ``run_isolated``."""

    def __init__(self, root: str | Path, python: str = sys.executable, extra_args: tuple[str, ...] = ()) -> None:
        self.root = Path(root)
        self.python = python
        self.extra_args = tuple(extra_args)

    def suite_command(self, kernel: str, versions: list[str], out_json: Path,
                      trials: tuple[str, ...] = DEFAULT_TRIALS) -> list[str]:
        cmd = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kernel", kernel,
               "--kernel-version", ",".join(versions), "--kforge-json", str(out_json), *self.extra_args]
        if tuple(trials) != DEFAULT_TRIALS:
            cmd += [STRESS_TRIAL_OPTION, ",".join(trials)]
        return cmd

    def profile_command(self, kernel: str, version: str, out_dir: Path,
                        trials: tuple[str, ...] = DEFAULT_TRIALS) -> list[str]:
        return [self.python, "-m", "pytest_kforge.profile", "--kernel", kernel, "--version", version,
                "--trial", ",".join(trials), "--out", str(out_dir)]

    def run_suite(self, kernel: str, versions: list[str], *, out_json: Path, timeout_s: float,
                  trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome:
        cmd = self.suite_command(kernel, versions, out_json, trials)
        res = compat.run_isolated(cmd, timeout_s=timeout_s, cwd=self.root)
        text = shlex.join(cmd)
        results = None
        if out_json.exists():
            try:
                results = load_results(out_json).to_json()
            except ResultsError:
                results = None
        if res.timed_out:
            return SuiteOutcome(False, results, f"suite timed out after {timeout_s:g} s", text, res.wall_s)
        if results is None:
            why = res.reason or f"exit code {res.returncode}"
            return SuiteOutcome(False, None, f"suite wrote no results JSON ({why}): {_tail(res.stderr or res.stdout)}",
                                text, res.wall_s)
        # pytest exits 1 when a test failed; the JSON then says which, and EVALUATE reads it.
        reason = "ok" if res.returncode == 0 else f"pytest exit code {res.returncode} (see results)"
        if res.gpu_ok is False:
            reason += "; the GPU check after the run failed"
        return SuiteOutcome(True, results, reason, text, res.wall_s)

    def profile(self, kernel: str, version: str, *, out_dir: Path, timeout_s: float,
                trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome:
        cmd = self.profile_command(kernel, version, out_dir, trials)
        res = compat.run_isolated(cmd, timeout_s=timeout_s, cwd=self.root)
        reports = find_profile_reports(out_dir, kernel, version, trials)
        ok = bool(reports)
        reason = "ok" if ok else ("profiling timed out" if res.timed_out else
                                  f"no profile report ({res.reason or 'exit code ' + str(res.returncode)}): "
                                  f"{_tail(res.stderr or res.stdout)}")
        return SuiteOutcome(ok, None, reason, shlex.join(cmd), res.wall_s, reports)
