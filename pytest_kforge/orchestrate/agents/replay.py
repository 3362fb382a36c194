"""The replay backend: recorded agent exchanges played back, for tests and exact re-runs.

A transcript is JSON in one of two shapes:

* an exchange stored by a run (``runs/<id>/exchanges/<iter>-<STEP>-<agent>.json``): ``replies``
  (the agent's final texts, in order) and ``turns`` (Messages API content blocks) or ``tool_calls``;
* a recorded Messages API exchange (``tests/data/transcripts/*.json``): ``responses``, the raw
  response bodies; the final texts are those of responses whose ``stop_reason`` is not ``tool_use``.

Replaying re-executes the recorded ``write_file`` calls (through the same path guard), so a
replayed designer leaves the same version file behind, then serves the replies through the same
contract-retry rule as a live agent.  Transcripts are looked up by the step's exchange name
first (an exact re-run of a past run), then taken in order from a queue (tests).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

from .. import compat
from ..tools import Toolbox
from .base import (AgentContext, AgentContractError, ask_with_contract, design_prompt, expecting,
                   profile_prompt)

__all__ = ["Transcript", "load_transcript", "ReplayProfiler", "ReplayDesigner"]


class Transcript:
    def __init__(self, data: dict[str, Any], origin: str = "") -> None:
        self.origin = origin
        if "responses" in data:
            finals = [r for r in data["responses"] if r.get("stop_reason") != "tool_use"]
            self.replies = ["\n".join(b["text"] for b in r.get("content", []) if b.get("type") == "text")
                            for r in finals]
            blocks = [b for r in data["responses"] for b in r.get("content", [])]
        else:
            self.replies = list(data.get("replies", []))
            blocks = [b for t in data.get("turns", []) for b in t.get("content", [])]
        self.tool_calls = [{"tool": b["name"], "input": b.get("input", {})} for b in blocks
                           if b.get("type") == "tool_use"] + list(data.get("tool_calls", []))


def load_transcript(path: str | Path) -> Transcript:
    path = Path(path)
    return Transcript(json.loads(path.read_text(encoding="utf-8")), str(path))


class _ReplayAgent:
    label = ""

    def __init__(self, source: str | Path | list[Any] | None = None) -> None:
        self.name = "replay"
        self.dir: Path | None = None
        self.queue: deque[Transcript] = deque()
        if isinstance(source, (str, Path)) and Path(source).is_dir():
            self.dir = Path(source)
        elif isinstance(source, (str, Path)):
            self.queue.append(load_transcript(source))
        elif source:
            self.queue.extend(t if isinstance(t, Transcript) else
                              (load_transcript(t) if isinstance(t, (str, Path)) else Transcript(t)) for t in source)
        self.played: list[str] = []

    def _next(self, context: AgentContext, label: str) -> Transcript:
        if self.dir is not None:
            path = self.dir / f"{context.step_key.replace(':', '-')}-{label}.json"
            if path.exists():
                return load_transcript(path)
        if self.queue:
            return self.queue.popleft()
        raise AgentContractError(f"the replay transcripts have no exchange for {context.step_key} {label}; "
                                 f"record one (a run stores them in runs/<id>/exchanges/) or use another backend")

    def _play(self, context: AgentContext, label: str, prompt: str, parse: Any, contract: str) -> Any:
        tr = self._next(context, label)
        self.played.append(tr.origin or label)
        box = Toolbox(context)
        for call in tr.tool_calls:
            if call["tool"] == "write_file":  # side effects the rest of the run depends on
                box.call("write_file", dict(call["input"]))
        replies = deque(tr.replies)
        context.exchange.update({"prompt": prompt, "replayed_from": tr.origin, "replies": [],
                                 "tool_calls": box.calls})

        def converse(_text: str) -> str:
            if not replies:
                raise AgentContractError(f"the transcript {tr.origin or label} ran out of replies")
            r = replies.popleft()
            context.exchange["replies"].append(r)
            return r

        return ask_with_contract(converse, prompt, parse, agent=self.label, contract=contract)


class ReplayProfiler(_ReplayAgent):
    label = "profiler"

    def profile(self, kernel: str, version: str, trial: str, params: dict[str, int], *,
                context: AgentContext) -> Any:
        return self._play(context, f"profiler-{trial}", profile_prompt(kernel, version, params),
                          expecting(compat.contracts.ProfileContract.parse, kernel, version), "profile")


class ReplayDesigner(_ReplayAgent):
    label = "kernel-designer"

    def design(self, task: Any, *, context: AgentContext) -> Any:
        return self._play(context, "designer", design_prompt(task, context.language),
                          expecting(compat.contracts.NewVersionSummary.parse, task.kernel, task.new_version),
                          "New Version")
