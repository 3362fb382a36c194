"""Recording wrappers: every backend's exchange gets what the replay backend needs to play it back.

* a profiler's exchange gets ``contract`` (the ProfileContract as JSON, raw ncu metrics included),
  so a replay serves the same contract whatever produced it (ncu, an agent CLI, a person);
* a designer's exchange gets ``files`` (path -> text of every file it created or changed under
  ``kernels/<kernel>/``: what it wrote in this process, plus the files its summary names, which a
  handoff designer wrote before the process started) and, when the backend recorded no reply text,
  ``replies = [summary.render()]``.

The loop wraps whatever agents it is given, so no backend has to remember to do this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .allowlist import tree_snapshot
from .base import AgentContext

__all__ = ["RecordedProfiler", "RecordedDesigner", "kernel_files", "snapshot"]

_MAX_FILE = 400_000  # a version or helper module is far smaller; a bigger file is named, not copied


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """``{path relative to folder: (size, mtime_ns)}`` of the ``.py`` files in ``folder`` and below (a kernel keeps
    its versions in ``versions/`` and its libraries in ``cute/``, ``cutile/``: a flat listing missed them all)."""
    if not folder.is_dir():
        return {}
    return {k: v for k, v in tree_snapshot(folder).items() if k.endswith(".py")}


def kernel_files(root: Path, kernel_dir: Path, names: list[str]) -> dict[str, str]:
    """``{path relative to root: text}`` of ``names`` (relative to ``kernel_dir``), skipping missing or huge ones."""
    out: dict[str, str] = {}
    for n in sorted(set(names)):
        p = kernel_dir / n
        if p.is_file() and p.stat().st_size <= _MAX_FILE:
            rel = p.resolve().relative_to(root.resolve()).as_posix() if p.resolve().is_relative_to(root.resolve()) \
                else str(p)
            out[rel] = p.read_text(encoding="utf-8")
    return out


class _Recorded:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    @classmethod
    def wrap(cls, inner: Any) -> Any:
        """``inner`` wrapped once (wrapping a wrapped agent again is a no-op)."""
        return inner if isinstance(inner, cls) else cls(inner)


class RecordedProfiler(_Recorded):
    """Wraps a profiler; stores the returned contract in the step's exchange."""

    def profile(self, kernel: str, version: str, trial: str, params: dict[str, int], *,
                context: AgentContext) -> Any:
        c = self.inner.profile(kernel, version, trial, params, context=context)
        d = c.to_dict()
        if isinstance(getattr(c, "metrics", None), dict):
            d["metrics"] = dict(c.metrics)
        context.exchange["contract"] = d
        return c


class RecordedDesigner(_Recorded):
    """Wraps a designer; stores the kernel files it wrote and its summary in the step's exchange."""

    def design(self, task: Any, *, context: AgentContext) -> Any:
        kdir = Path(context.kernels_dir) / task.kernel
        before = snapshot(kdir)
        summary = self.inner.design(task, context=context)
        after = snapshot(kdir)
        changed = [n for n, sig in after.items() if before.get(n) != sig]
        declared = [(Path(context.root) / p).resolve().relative_to(kdir.resolve()).as_posix()
                    for p in [*summary.files_created, *summary.files_modified]
                    if (Path(context.root) / p).resolve().is_relative_to(kdir.resolve())]
        context.exchange["files"] = kernel_files(Path(context.root), kdir, [*changed, *declared])
        if not context.exchange.get("replies"):
            context.exchange["replies"] = [summary.render()]
        context.exchange["summary"] = summary.to_dict()
        return summary
