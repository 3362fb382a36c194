"""The command backend: any coding-agent CLI is the designer and/or the profiler.

For each exchange the orchestrator writes the step's files (:mod:`.exchange`), then runs the
command with ``bash -c`` from the project root through ``run_isolated`` (own process group, a time
limit, the whole group killed on timeout), with these environment variables:

=====================  ============================================================
``KFORGE_PROMPT_FILE``  launch prompt + contract + where to reply (give it to the CLI)
``KFORGE_TASK_FILE``    the step's contract alone (OptimizationTask / profile request)
``KFORGE_AGENT_FILE``   the agent's system prompt with its preloaded skills
``KFORGE_AGENT``        ``kernel-designer`` or ``profiler`` (Claude Code: ``--agent``)
``KFORGE_REPLY_FILE``   where the reply contract goes (else stdout is the reply)
``KFORGE_VERSION_FILE`` DESIGN: the version file to create
``KFORGE_ROOT``, ``KFORGE_KERNEL``, ``KFORGE_VERSION``, ``KFORGE_STEP``, ``KFORGE_TRIAL``
=====================  ============================================================

The tree is checked against the write allowlist (:mod:`.allowlist`) after every call: a write
outside it fails the step (no retry: that is a trust breach, not a format slip).  A reply that
breaks its contract gets the one retry of :func:`.base.ask_with_contract`: the command runs again
with the parse error put before the original prompt.  A hang is killed at ``timeout_s``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import KforgeError
from ...registry import version_path
from .. import compat
from .allowlist import Allowlist, diff_trees, tree_snapshot
from .base import AgentContext, ask_with_contract, design_prompt, expecting, profile_prompt
from .exchange import exchange_files, write_exchange

__all__ = ["AgentCommandError", "CommandDesigner", "CommandProfiler", "declared_paths_allowed"]

_TAIL = 4000


class AgentCommandError(KforgeError):
    """The agent command hung, failed, or wrote outside its allowlist."""


def _tail(text: str) -> str:
    return text[-_TAIL:] if text else ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def declared_paths_allowed(parse: Any, allow: Allowlist) -> Any:
    """``parse`` that also refuses a summary naming a file outside the allowlist (so it gets the retry)."""
    def checked(text: str) -> Any:
        got = parse(text)
        bad = [p for p in [*got.files_created, *got.files_modified] if not allow.allows(p)]
        if bad:
            raise compat.contracts.ContractError(
                f"the summary names {', '.join(bad)}, outside what the designer may write "
                f"({', '.join(allow.folders)}); list only files you wrote there", "files_created")
        return got
    return checked


class _CommandAgent:
    role = ""

    def __init__(self, command: str, *, timeout_s: float = 3600.0) -> None:
        if not command or not command.strip():
            raise KforgeError(f"the {self.role} command is empty; pass a command line such as "
                              f"--{self.role}-cmd 'claude -p ...' (see the orchestrator README)")
        self.command = command
        self.timeout_s = float(timeout_s)
        self.name = "command"

    def _allowlist(self, context: AgentContext, task_dir: Path) -> Allowlist:
        extra = (f"reports/{context.kernel}/",) if self.role == "profiler" else ()
        return Allowlist(context.root, context.kernels_dir, context.kernel, extra=extra, task_dir=task_dir)

    def _exchange(self, context: AgentContext, label: str, *, prompt: str, task: str, parse: Any, contract: str,
                  env: dict[str, str]) -> Any:
        files = exchange_files(context, label)
        allow = self._allowlist(context, files.dir)
        root = Path(context.root).resolve()
        skip = tuple(p for p in (context.run_dir.parent if context.run_dir else None,) if p is not None)
        context.exchange.update({"backend": "command", "command": self.command, "prompt": prompt,
                                 "task_dir": files.show(files.dir), "replies": [], "calls": []})
        full_env = {**os.environ, **env, "KFORGE_PROMPT_FILE": str(files.prompt), "KFORGE_TASK_FILE": str(files.task),
                    "KFORGE_AGENT_FILE": str(files.agent), "KFORGE_REPLY_FILE": str(files.reply),
                    "KFORGE_ROOT": str(root), "KFORGE_KERNEL": context.kernel, "KFORGE_STEP": context.step_key}

        def converse(text: str) -> str:
            first = not context.exchange["calls"]
            write_exchange(files, root=root, role=self.role, prompt=text if first else f"{text}\n\n{prompt}",
                           task=task)
            before = tree_snapshot(root, skip)
            res = compat.run_isolated(["bash", "-c", self.command], timeout_s=self.timeout_s, cwd=root,
                                      env=full_env, check_gpu_after=False)
            changes = diff_trees(before, tree_snapshot(root, skip))
            reply = files.reply.read_text(encoding="utf-8") if files.reply.exists() else ""
            source = "reply file" if reply.strip() else "stdout"
            reply = reply if reply.strip() else res.stdout
            call = {"returncode": res.returncode, "wall_s": round(res.wall_s, 3), "reason": res.reason,
                    "timed_out": res.timed_out, "reply_from": source, "changed": changes.all[:200],
                    "stdout_tail": _tail(res.stdout), "stderr_tail": _tail(res.stderr)}
            context.exchange["calls"].append(call)
            bad = allow.violations(changes)
            if bad:
                left = allow.undo(changes, bad)
                call["refused_writes"] = bad
                raise AgentCommandError(
                    f"the {self.role} command wrote outside its allowlist ({', '.join(bad[:8])}); it may write only "
                    f"{', '.join(allow.folders)} and its task folder"
                    + (f"; the files it created there were removed, restore {', '.join(left[:8])} from version "
                       f"control (git checkout -- <path>)" if left else "; the files it created there were removed"))
            if res.timed_out:
                raise AgentCommandError(f"the {self.role} command timed out after {self.timeout_s:g} s and was killed "
                                        f"with its process group; raise --agent-timeout or fix the command, then "
                                        f"--resume")
            if res.returncode != 0:
                raise AgentCommandError(f"the {self.role} command exited with code {res.returncode} "
                                        f"({_last_line(res.stderr or res.stdout)}); fix it and --resume")
            context.exchange["replies"].append(reply)
            return reply

        return ask_with_contract(converse, prompt, parse, agent=f"{self.role} command", contract=contract)


class CommandDesigner(_CommandAgent):
    role = "designer"

    def design(self, task: Any, *, context: AgentContext) -> Any:
        files = exchange_files(context, "designer")
        vfile = version_path(Path(context.kernels_dir) / task.kernel, task.new_version)
        parse = declared_paths_allowed(expecting(compat.contracts.NewVersionSummary.parse, task.kernel,
                                                 task.new_version), self._allowlist(context, files.dir))
        return self._exchange(context, "designer", prompt=design_prompt(task, context.language), task=task.render(),
                              parse=parse, contract="New Version",
                              env={"KFORGE_AGENT": "kernel-designer", "KFORGE_VERSION": task.new_version,
                                   "KFORGE_VERSION_FILE": str(vfile)})


class CommandProfiler(_CommandAgent):
    role = "profiler"

    def profile(self, kernel: str, version: str, trial: str, params: dict[str, int], *,
                context: AgentContext) -> Any:
        prompt = profile_prompt(kernel, version, params)
        return self._exchange(context, f"profiler-{trial}", prompt=prompt, task=prompt,
                              parse=expecting(compat.contracts.ProfileContract.parse, kernel, version),
                              contract="profile", env={"KFORGE_AGENT": "profiler", "KFORGE_VERSION": version,
                                                       "KFORGE_TRIAL": trial})
