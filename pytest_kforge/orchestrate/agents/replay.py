"""The replay backend: recorded agent exchanges played back, for tests and exact re-runs.

A transcript is JSON in one of two shapes:

* an exchange stored by a run (``runs/<id>/exchanges/<iter>-<STEP>-<agent>.json``): ``replies``
  (the agent's final texts, in order) and ``turns`` (Messages API content blocks) or ``tool_calls``;
* any backend's exchange as the loop records it (:mod:`.recording`): ``contract`` (a profiler's
  returned contract, served as it is) and ``files`` (a designer's kernel files, written back);
* a recorded Messages API exchange (``tests/data/transcripts/*.json``): ``responses``, the raw
  response bodies; the final texts are those of responses whose ``stop_reason`` is not ``tool_use``.

Replaying re-executes the recorded ``write_file`` calls (through the same path guard), so a
replayed designer leaves the same version file behind, then serves the replies through the same
contract-retry rule as a live agent.  Transcripts are looked up by the step's exchange name
first (an exact re-run of a past run), then taken in order from a queue (tests).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from .. import compat
from ..state import read_json
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
        written = {c["input"].get("path") for c in self.tool_calls if c["tool"] == "write_file"}
        self.tool_calls += [{"tool": "write_file", "input": {"path": path, "content": text}}
                            for path, text in (data.get("files") or {}).items() if path not in written]
        self.contract: dict[str, Any] | None = data.get("contract")


def load_transcript(path: str | Path) -> Transcript:
    return Transcript(read_json(path), str(path))


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
            if path.exists() or path.with_name(path.name + ".gz").exists():
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
        label = f"profiler-{trial}"
        if self.dir is not None:  # a recorded contract is served as it is (raw metrics included)
            tr = self._next(context, label)
            if tr.contract is not None:
                from ..suite import contract_from_report

                self.played.append(tr.origin or label)
                c = contract_from_report(tr.contract)
                if (c.kernel, c.version) != (kernel, version):
                    raise AgentContractError(f"the recorded contract {tr.origin} is about {c.kernel} {c.version}, "
                                             f"not {kernel} {version}; the replay does not follow the recording")
                context.exchange.update({"replayed_from": tr.origin})
                return c
        return self._play(context, f"profiler-{trial}", profile_prompt(kernel, version, params),
                          expecting(compat.contracts.ProfileContract.parse, kernel, version), "profile")


class ReplayDesigner(_ReplayAgent):
    label = "kernel-designer"

    def design(self, task: Any, *, context: AgentContext) -> Any:
        return self._play(context, "designer", design_prompt(task, context.language),
                          expecting(compat.contracts.NewVersionSummary.parse, task.kernel, task.new_version),
                          "New Version")
