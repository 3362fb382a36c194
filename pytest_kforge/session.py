"""State of one kforge pytest run: what was selected, its trial inputs, the results, the JSON.

One :class:`KforgeSession` lives in ``config.stash[SESSION_KEY]``; the generated tests, the
benchmark glue and other helpers' plugins reach it through the ``kforge_session`` fixture.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .config import KforgeConfig
from .errors import KforgeError, UnknownKernelError
from .registry import Kernel, Registry, Version
from .results import CorrectnessRecord, RunResults, TrialResult
from .spec import Roofline, TrialConfig
from .trialinputs import TrialInputs

__all__ = ["SESSION_KEY", "Selection", "KforgeSession", "parse_kernel_arg", "select"]


@dataclasses.dataclass
class Selection:
    """The kernel, versions and trial configs a run covers."""

    kernel: Kernel
    versions: list[Version]
    trials: list[TrialConfig]


def parse_kernel_arg(kernel: str, kernel_version: str | None) -> tuple[str, str]:
    """``("mla", "v4")`` from ``--kernel mla:v4`` or ``--kernel mla --kernel-version v4``."""
    name, _, inline = kernel.partition(":")
    if inline and kernel_version and inline != kernel_version:
        raise KforgeError(f"--kernel {kernel} names version {inline!r} but --kernel-version says "
                          f"{kernel_version!r}; give the version once")
    return name, (inline or kernel_version or "all")


def select(config: KforgeConfig, kernel_arg: str, kernel_version: str | None, trials: str | None) -> Selection:
    """Resolve the command line against the registry; raises a one-line KforgeError when wrong."""
    name, versions = parse_kernel_arg(kernel_arg, kernel_version)
    reg = Registry(config.kernels_dir)
    if not config.kernels_dir.is_dir():
        raise UnknownKernelError(name, [], f"{config.kernels_dir} (missing)")
    kernel = reg.kernel(name)
    chosen = kernel.versions(versions)
    if not chosen:
        raise KforgeError(f"kernel {name!r} has no versions yet; add kernels/{name}/v0.py")
    matrix = {**{k: dict(v) for k, v in kernel.spec.trials.items()}, **config.trial_matrix.get(name, {})}
    if trials:
        wanted = [t.strip() for t in trials.split(",") if t.strip()]
    else:
        wanted = [t for t in (config.trials or kernel.spec.default_trials) if t in matrix]
    unknown = [t for t in wanted if t not in matrix]
    if unknown:
        raise KforgeError(f"kernel {name!r} has no trial {unknown[0]!r}; it has {', '.join(matrix)}; "
                          f"pick with --trial NAME[,NAME]")
    return Selection(kernel, chosen, [TrialConfig(t, dict(matrix[t])) for t in wanted])


class KforgeSession:
    """Selection, run settings, the session-scoped input cache and the collected results."""

    def __init__(
        self,
        config: KforgeConfig,
        selection: Selection | None,
        *,
        seed: int,
        device: str,
        device_explicit: bool,
        rounds: int,
        warmup: int,
        roofline: Roofline,
        fuzz_examples: int,
        bench: bool,
        json_path: Path | None,
        clock_guard_pct: float = 99.0,
        clock_witness_ms: float = 0.0,
    ) -> None:
        self.config = config
        self.selection = selection
        self.seed = seed
        self.device = device
        self.device_explicit = device_explicit
        self.rounds = rounds
        self.warmup = warmup
        self.clock_guard_pct = clock_guard_pct  # 0: off (see pytest_kforge.gpuclock)
        self.clock_witness_ms = clock_witness_ms  # 0: off (see pytest_kforge.clockwitness)
        self.roofline = roofline
        self.fuzz_examples = fuzz_examples
        self.bench = bench
        self.json_path = json_path
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.results: list[TrialResult] = []
        self.correctness: list[CorrectnessRecord] = []
        self._inputs: TrialInputs | None = None
        #: nodeid -> ("correctness" | "fuzz" | "trial", version)
        self.kinds: dict[str, tuple[str, str]] = {}
        self.outcomes: dict[str, dict[str, int]] = {}
        self.skip_reasons: dict[str, int] = {}

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    # ---- inputs ----------------------------------------------------------------------------------
    @property
    def inputs(self) -> TrialInputs:
        """The run's trial inputs (built once per trial config, shared by all versions): :mod:`.trialinputs`."""
        if self._inputs is None:
            if self.selection is None:
                raise KforgeError("this pytest run has no kforge selection; pass --kernel NAME to build trial inputs")
            self._inputs = TrialInputs(self.selection.kernel.spec, seed=self.seed, device=self.device)
        return self._inputs

    # ---- results ---------------------------------------------------------------------------------
    def add_result(self, result: TrialResult) -> None:
        self.results.append(result)
        if self.json_path is not None:  # survives a run killed before sessionfinish (pytest_kforge.journal)
            from .journal import append

            append(self.json_path, result.to_json(), self._meta())

    def add_correctness(self, version: str, nodeid: str, passed: bool, message: str) -> None:
        self.correctness.append(CorrectnessRecord(version, nodeid, passed, message))

    def _meta(self) -> dict[str, Any]:
        """The run's identity, in the results JSON and in each journal line."""
        return {"kernel": self.selection.kernel.name if self.selection else None, "device": self.device,
                "seed": self.seed, "started": self.started}

    def run_results(self) -> RunResults:
        """The run so far as the results JSON's record (:mod:`pytest_kforge.results`)."""
        from .gpuinfo import gpu_name

        meta = self._meta()
        return RunResults(kernel=meta["kernel"], gpu=gpu_name() if self.on_gpu else None, device=self.device,
                          seed=self.seed, started=self.started,
                          roofline={"tbs": self.roofline.bandwidth_bytes_per_s / 1e12,
                                    "tflops": self.roofline.flops_per_s / 1e12},
                          results=list(self.results), correctness=list(self.correctness))

    def payload(self) -> dict[str, Any]:
        """The results JSON's content (``run_results().to_json()``), which ``pytest_kforge_write_json`` may edit."""
        return self.run_results().to_json()

    def write_json(self, payload: Mapping[str, Any] | None = None) -> Path | None:
        """Write the results JSON (:class:`~pytest_kforge.results.RunResults`) to ``--kforge-json`` atomically."""
        if self.json_path is None:
            return None
        from .fsutil import atomic_write_text

        from .journal import journal_path

        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.json_path, json.dumps(payload or self.payload(), indent=2, default=str) + "\n")
        journal_path(self.json_path).unlink(missing_ok=True)  # the complete JSON replaces it
        return self.json_path

    # ---- summary ---------------------------------------------------------------------------------
    def count(self, kind: str, outcome: str, reason: str = "") -> None:
        per = self.outcomes.setdefault(kind, {})
        per[outcome] = per.get(outcome, 0) + 1
        if outcome == "skipped":
            self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1

    def summary_line(self) -> str:
        """One line: what ran (per kind and outcome), what was skipped and why (grouped by reason)."""
        if self.selection is None:
            return ""
        ran = []
        for kind in ("correctness", "fuzz", "trial"):
            per = {o: n for o, n in self.outcomes.get(kind, {}).items() if o != "skipped"}
            if per:
                ran.append(f"{kind} " + ", ".join(f"{n} {o}" for o, n in sorted(per.items())))
        skipped = sum(self.skip_reasons.values())
        line = (f"kforge {self.selection.kernel.name} {','.join(v.name for v in self.selection.versions)} "
                f"on {self.device} (seed {self.seed}): ran " + ("; ".join(ran) if ran else "nothing"))
        if skipped:
            reasons = sorted(self.skip_reasons.items(), key=lambda kv: -kv[1])
            why = " | ".join(f"{n} x {r or 'no reason given'}" for r, n in reasons[:3])
            if len(reasons) > 3:
                why += f" | {len(reasons) - 3} more reasons (-rs lists every skip)"
            line += f"; skipped {skipped}: {why}"
        return line


#: where the plugin keeps the run's session (``config.stash[SESSION_KEY]``)
SESSION_KEY = pytest.StashKey[KforgeSession]()
