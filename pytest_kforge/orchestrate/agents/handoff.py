"""The handoff backend: a person, or a Claude Code session using ``.claude/agents``, is the designer.

At DESIGN the run writes the exchange files (:mod:`.exchange`: ``prompt.md``, ``task.md``,
``agent.md``) plus ``summary.template.md``, raises :class:`~.base.AwaitingAgent` (the loop records
the step ``waiting`` and the process exits 0) and prints one paragraph saying what to write where.
``--resume <id>`` redoes DESIGN, which now reads the version file and ``reply.md`` (the
NewVersionSummary); when either is missing or the summary breaks its contract the step stays
``waiting`` and the one sentence saying what is wrong is printed.

Nothing is redone: the task files are rewritten with the same text, and the version file is the
designer's.  VERIFY, EVALUATE and LEARN stay the orchestrator's (the devlog entry and the knowledge
evidence come from the run, not from the designer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...fsutil import atomic_write_text
from ...registry import version_path
from .. import compat
from .allowlist import Allowlist
from .base import AgentContext, AwaitingAgent, design_prompt, expecting
from .command import declared_paths_allowed
from .exchange import exchange_files, write_exchange

__all__ = ["HandoffDesigner", "summary_template"]


def summary_template(kernel: str, version: str, version_path: str) -> str:
    """A NewVersionSummary skeleton with what the run already knows filled in."""
    return (f"## New Version: {kernel} {version}\n"
            f"### Changes Applied: <optimisation name as written in the task>: <what you changed>; <next change>\n"
            f"### Files: Created: {version_path}; Modified: none\n"
            f"### Correctness: PASS\n\n"
            f"### Trial Configurations Checked\n"
            f"1. b=32, s=1, t=4096 -- decode default: <why this point matters>\n"
            f"2. b=32, s=16, t=4096 -- spec default: <why this point matters>\n\n"
            f"### Devlog Entry Written: docs/kernels/{kernel}.md\n")


class HandoffDesigner:
    name = "handoff"

    def design(self, task: Any, *, context: AgentContext) -> Any:
        files = exchange_files(context, "designer")
        root = Path(context.root).resolve()
        vfile = version_path(Path(context.kernels_dir) / task.kernel, task.new_version)
        vrel = files.show(vfile)
        prompt = design_prompt(task, context.language)
        reply_exists = files.reply.exists()
        if not reply_exists:  # first visit: write the task (a resume must not clear a reply being written)
            write_exchange(files, root=root, role="designer", prompt=prompt, task=task.render())
            atomic_write_text(files.dir / "summary.template.md", summary_template(task.kernel, task.new_version, vrel))
        context.exchange.update({"backend": "handoff", "prompt": prompt, "task_dir": files.show(files.dir)})
        missing = []
        if not vfile.exists():
            missing.append(f"the version file {vrel} does not exist")
        if not reply_exists:
            missing.append(f"the summary {files.show(files.reply)} does not exist")
        if missing:
            raise AwaitingAgent(self._paragraph(task, context, files, vrel),
                                f"{' and '.join(missing)}; write {'them' if len(missing) > 1 else 'it'} as "
                                f"{files.show(files.prompt)} says, then --resume")
        allow = Allowlist(root, context.kernels_dir, context.kernel, task_dir=files.dir)
        parse = declared_paths_allowed(expecting(compat.contracts.NewVersionSummary.parse, task.kernel,
                                                 task.new_version), allow)
        text = files.reply.read_text(encoding="utf-8")
        try:
            summary = parse(text)
        except compat.contracts.ContractError as exc:
            raise AwaitingAgent(f"the summary {files.show(files.reply)} breaks the NewVersionSummary contract: {exc}",
                                f"the summary {files.show(files.reply)} breaks the NewVersionSummary contract ({exc}); "
                                f"fix it, then --resume") from exc
        context.exchange["replies"] = [text]
        return summary

    @staticmethod
    def _paragraph(task: Any, context: AgentContext, files: Any, vrel: str) -> str:
        run = context.run_dir.name if context.run_dir is not None else "<run>"
        return (f"DESIGN is handed off: {task.kernel} {task.current} -> {task.new_version} ({context.language}). "
                f"Read {files.show(files.prompt)} (the kernel-designer launch prompt and the Optimization Task; the "
                f"agent is agents/kernel-designer.md, in Claude Code the kernel-designer subagent), write the new "
                f"version to {vrel} with PARENT = {task.current!r} (write only under "
                f"{files.show(Path(context.kernels_dir) / task.kernel)}/ and docs/), then write its "
                f"NewVersionSummary to {files.show(files.reply)} in the shape of "
                f"{files.show(files.dir / 'summary.template.md')} ('## New Version: {task.kernel} "
                f"{task.new_version}', '### Changes Applied: a; b' naming each applied optimisation as the task "
                f"writes it, '### Files: Created: ...; Modified: ...', '### Correctness: PASS|FAIL', '### Trial "
                f"Configurations Checked' with '1. b=X, s=X, t=X -- why', '### Devlog Entry Written: "
                f"docs/kernels/{task.kernel}.md'); do not write the devlog entry or knowledge evidence yourself: "
                f"`python -m pytest_kforge.orchestrate --resume {run}` runs VERIFY, EVALUATE and LEARN, which do.")
