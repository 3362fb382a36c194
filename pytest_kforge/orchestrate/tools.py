"""Tools the agents may call.  Each takes JSON-able arguments and returns a string; failures are
returned as ``ERROR: <one sentence>`` (never raised), so the model can read and correct them.

``TOOL_SCHEMAS`` is the Messages API ``tools`` list; :meth:`Toolbox.call` dispatches by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..registry import kernel_tags

from . import compat
from .agents.base import AgentContext

__all__ = ["TOOL_SCHEMAS", "Toolbox"]

_MAX_READ = 40_000

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"name": "read_file", "description": "Read a text file of the project (path relative to the project root).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "write_file",
     "description": "Write a text file; only under kernels/<kernel>/ and docs/ (anything else is refused).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                      "required": ["path", "content"]}},
    {"name": "run_suite",
     "description": "Run the correctness tests and the trial matrix for a version (and its parent); returns "
                    "the measured rows as JSON.",
     "input_schema": {"type": "object", "properties": {"version": {"type": "string"}}, "required": ["version"]}},
    {"name": "profile_version",
     "description": "Profile a version under ncu on trials (default decode,spec); returns the profile contracts.",
     "input_schema": {"type": "object", "properties": {"version": {"type": "string"},
                                                       "trials": {"type": "string"}}, "required": ["version"]}},
    {"name": "search_knowledge",
     "description": "Search the optimisation catalog by words, or by metrics (JSON object of short metric names).",
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"},
                                                       "metrics": {"type": "object"}}}},
]


class Toolbox:
    """The tools bound to one project root, kernel and run."""

    def __init__(self, context: AgentContext) -> None:
        self.ctx = context
        self.root = Path(context.root).resolve()
        kdir = Path(context.kernels_dir).resolve()
        krel = kdir.relative_to(self.root).as_posix() if kdir.is_relative_to(self.root) else "kernels"
        self.guard = compat.PathGuard(self.root, allowed=(f"{krel}/{context.kernel}/", "docs/"))
        self.calls: list[dict[str, Any]] = []

    def call(self, name: str, args: dict[str, Any]) -> str:
        fn = getattr(self, f"tool_{name}", None)
        if fn is None:
            known = ", ".join(t["name"] for t in TOOL_SCHEMAS)
            out = f"ERROR: there is no tool {name!r}; the tools are {known}"
        else:
            try:
                out = fn(**args)
            except TypeError as exc:
                out = f"ERROR: bad arguments for {name} ({exc}); see its input_schema"
            except Exception as exc:  # noqa: BLE001 - tools never raise to the model
                out = f"ERROR: {name} failed: {type(exc).__name__}: {exc}"
        self.calls.append({"tool": name, "input": args, "output": out[:2000]})
        return out

    def tool_read_file(self, path: str) -> str:
        p = Path(path)
        if p.is_absolute() or ".." in p.parts:
            return f"ERROR: {path} is absolute or contains '..'; give a path relative to the project root"
        full = (self.root / p).resolve()
        if not full.is_relative_to(self.root):
            return f"ERROR: {path} leaves the project; read only files inside it"
        if not full.is_file():
            return f"ERROR: {path} does not exist; list what exists with search_knowledge or read a known file"
        from pytest_kforge.fsutil import read_text_gz

        try:  # report twins and raw ncu CSVs are stored gzipped
            text = read_text_gz(full, errors="replace")
        except (OSError, EOFError) as exc:
            return f"ERROR: {path} is not a readable gzip file ({exc}); read the .md report beside it"
        return text if len(text) <= _MAX_READ else text[:_MAX_READ] + f"\n[... truncated at {_MAX_READ} chars]"

    def tool_write_file(self, path: str, content: str) -> str:
        from ..fsutil import atomic_write_text

        try:
            target = self.guard.resolve_for_write(path)
        except compat.PathRefused as exc:
            return f"ERROR: {exc}"
        atomic_write_text(target, content)
        return f"wrote {len(content)} chars to {path}"

    def tool_run_suite(self, version: str) -> str:
        if self.ctx.runner is None or not self.ctx.can_profile:
            return "ERROR: no GPU here, so the suite cannot run; the orchestrator runs it in VERIFY"
        out_json = (self.ctx.run_dir or self.root / "runs") / f"tool-suite-{self.ctx.step_key.replace(':', '-')}-{version}.json"
        outcome = self.ctx.runner.run_suite(self.ctx.kernel, [version], out_json=out_json, timeout_s=self.ctx.timeout_s)
        if not outcome.ok or outcome.results is None:
            return f"ERROR: the suite did not produce results: {outcome.reason}"
        rows = [{k: r.get(k) for k in ("version", "trial", "correct", "median_us", "spread_pct", "pct_floor",
                                       "note", "error")} for r in outcome.results.get("results", [])]
        fails = [c for c in outcome.results.get("correctness", []) if not c.get("passed")]
        return json.dumps({"rows": rows, "correctness_failures": fails[:5]}, indent=1)

    def tool_profile_version(self, version: str, trials: str = "decode,spec") -> str:
        if self.ctx.runner is None or not self.ctx.can_profile:
            return "ERROR: no GPU/ncu here, so profiling cannot run; read reports/<kernel>/<version>/<trial>.md"
        tr = tuple(t.strip() for t in trials.split(",") if t.strip())
        out_dir = self.ctx.reports_dir or (self.root / "reports")
        outcome = self.ctx.runner.profile(self.ctx.kernel, version, out_dir=out_dir, timeout_s=self.ctx.timeout_s,
                                          trials=tr)
        if not outcome.reports:
            return f"ERROR: profiling produced no report: {outcome.reason}"
        from .suite import contract_from_report

        return "\n\n".join(contract_from_report(d).render() for d in outcome.reports.values())

    def tool_search_knowledge(self, query: str = "", metrics: dict[str, float] | None = None) -> str:
        kb = self.ctx.knowledge
        if kb is None:
            return "ERROR: no knowledge base is configured for this run"
        if metrics:
            found = [compat.match_fields(m) for m in kb.match({k: float(v) for k, v in metrics.items()},
                                                               kernel_tags=kernel_tags(self.ctx.kernel,
                                                                                       self.ctx.kernels_dir))]
        else:
            words = [w.lower() for w in query.split() if w]
            found = []
            for e in kb.entries():
                f = compat.match_fields(e)
                hay = f"{f['name']} {f['title']} {f['path']}".lower()
                if all(w in hay for w in words):
                    found.append(f)
        if not found:
            return "no matching entries"
        return "\n".join(f"- {f['name']} ({f['kind']}, {f['path']}) est {f['est_gain_pct']:g}% trigger "
                         f"{f['trigger'] or '-'}" for f in found[:20])
