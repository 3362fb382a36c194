"""The eight-step loop: ANALYZE -> PROFILE -> SELECT -> STRATEGIZE -> DESIGN -> VERIFY -> EVALUATE -> LEARN.

Every iteration runs the eight steps as ``<iteration>:<STEP>``; each step's outputs are JSON and
are stored in the run state when the step ends, and the loop's working context is rebuilt from
them on ``--resume`` (a finished step is never redone; the step that was running is).  Progress is
one line per step, ending with the step's wall time.  A step handed off (``AwaitingAgent``) is
recorded ``waiting`` and the run returns with status ``waiting``.  A lock on
``runs/<kernel>.orchestrate.lock`` keeps two runs on one kernel apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import KforgeError
from ..fsutil import file_lock
from . import compat
from .agents.base import AwaitingAgent
from .agents.recording import RecordedDesigner, RecordedProfiler
from .options import Options
from .state import STEPS, RunState, seconds_since
from .steps import Steps
from .suite import SuiteRunner

__all__ = ["Options", "Orchestrator", "StepFailed", "DRY_STEPS", "gpu_available"]

DRY_STEPS = ("ANALYZE", "PROFILE", "SELECT", "STRATEGIZE")  # PROFILE in a dry run reads existing data only


def gpu_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch or a broken CUDA means no GPU
        return False


class StepFailed(KforgeError):
    """A step failed; the run state keeps every finished step for --resume."""


class Orchestrator(Steps):
    """The driver: runs the steps of :mod:`.steps` in order, records them, resumes a run."""

    def __init__(self, options: Options, *, profiler: Any, designer: Any, runner: SuiteRunner,
                 knowledge: Any = None, has_gpu: bool | None = None, out: Callable[[str], None] = print) -> None:
        self.o = options
        # every backend's exchanges are recorded in a shape the replay backend plays back
        self.profiler, self.designer = RecordedProfiler.wrap(profiler), RecordedDesigner.wrap(designer)
        self.runner = runner
        self.kb = knowledge if knowledge is not None else compat.make_knowledge_base(options.root / "docs/knowledge")
        self._has_gpu = has_gpu
        self.out = out
        self.ctx: dict[str, Any] = {}
        self.state: RunState | None = None
        self.devlog = options.root / "docs" / "kernels" / f"{options.kernel}.md"

    @property
    def has_gpu(self) -> bool:
        if self._has_gpu is None:
            self._has_gpu = gpu_available()
        return self._has_gpu

    # -- driver --------------------------------------------------------------------------------
    def preflight(self) -> None:
        """Bad input fails here, in one line, before a run folder exists."""
        from ..registry import Registry

        names = Registry(self.o.kernels_dir).kernel(self.o.kernel).version_names()  # type: ignore[arg-type]
        if self.o.from_version and self.o.from_version not in names:
            raise KforgeError(f"--from {self.o.from_version!r} is not a version of {self.o.kernel}; it has "
                              f"{', '.join(names)}; pick one of those")

    def run(self, resume: str | None = None) -> RunState:
        assert self.o.runs_dir is not None
        if not resume:
            self.preflight()
        with file_lock(self.o.runs_dir / f"{self.o.kernel}.orchestrate", timeout=self.o.lock_timeout_s):
            if resume:
                st = RunState.load(self.o.runs_dir, resume)
                st.status = "running"
                self.out(f"resuming run {st.run_id} ({sum(r.status == 'done' for r in st.steps.values())} steps done)")
            else:
                st = RunState.create(self.o.runs_dir, self.o.kernel, self.o.to_json())
                self.out(f"run {st.run_id}: {self.o.kernel}, {self.o.iterations} iteration(s), agents "
                         f"{self.o.agents}{', dry run' if self.o.dry_run else ''} -> {st.dir}")
            note = f"stand-ins used for missing modules: {', '.join(compat.FALLBACKS)}"
            if compat.FALLBACKS and note not in st.notes:
                st.notes.append(note)
            self.state = st
            try:
                for i in range(1, (1 if self.o.dry_run else self.o.iterations) + 1):
                    for step in STEPS:
                        if self.o.dry_run and step not in DRY_STEPS:
                            continue
                        self._step(i, step)
                    if self.ctx.get("stop"):
                        self.out(f"stopping: {self.ctx['stop']}")
                        break
            except AwaitingAgent:
                return st  # recorded waiting by _step; the paragraph was printed
            st.status = "dry-run" if self.o.dry_run else "done"
            st.save()
            return st

    def _step(self, i: int, step: str) -> None:
        st = self.state
        assert st is not None
        key = f"{i}:{step}"
        rec = st.done(key)
        if rec is not None:
            self.ctx.update(rec.outputs)
            self.out(f"[{key}] done earlier: {rec.outputs.get('line', '')}")
            return
        if self.ctx.get("iteration_stop") == i:
            outputs = {"skipped": self.ctx.get("stop", ""), "line": "skipped"}
            st.finish(st.begin(key, {}), outputs, 0.0)
            return
        self.out(f"[{key}] ...")
        prev = st.steps.get(key)
        handed = prev.started if prev is not None and prev.status == "waiting" and prev.started else None
        rec = st.begin(key, {"current": self.ctx.get("current"), "iteration": i})
        self._usage = {}
        self._cost = 0.0
        t0 = time.monotonic()
        try:
            outputs = getattr(self, f"step_{step.lower()}")(i, key)
        except AwaitingAgent as exc:
            if handed:  # still waiting: it was handed off then, not now
                rec.started = handed
            st.wait(rec, exc.missing, time.monotonic() - t0)
            self.out(f"[{key}] waiting: {exc}")
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, then reported in one line
            msg = f"{step} failed: {exc}"
            st.fail(rec, msg, time.monotonic() - t0)
            self.out(f"[{key}] FAILED: {exc}")
            raise StepFailed(f"{msg} (run {st.run_id}; fix the cause and rerun with --resume {st.run_id})") from exc
        wall = time.monotonic() - t0
        if handed:  # a handed-off step's time runs from the hand-off to the accepted reply: the designer's work
            rec.started = handed
            wall = max(wall, seconds_since(handed))
        st.finish(rec, outputs, wall, self._usage, self._cost)
        self.ctx.update(outputs)
        tok = f" [{sum(self._usage.values())} tokens, ${self._cost:.4f}]" if self._usage else ""
        self.out(f"[{key}] {outputs.get('line', 'ok')}{tok} ({wall:.1f} s)")
