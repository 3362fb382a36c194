"""The files of one exchange with an outside agent (a coding-agent CLI or a person).

Each exchange gets a folder ``runs/<id>/tasks/<iter>-<STEP>-<label>/`` holding

* ``prompt.md`` -- the seed's launch prompt for the role, the contract it answers (the
  ``## Optimization Task`` for DESIGN) and where to put the reply;
* ``task.md`` -- the step's contract alone (DESIGN: the OptimizationTask, parseable with
  ``OptimizationTask.parse``; PROFILE/VERIFY: the seed's profile request);
* ``agent.md`` -- the agent definition's system prompt (``agents/<name>.md`` without its front
  matter) followed by the skills it preloads, for CLIs that cannot load a Claude Code agent;
* ``reply.md`` -- written by the agent: its reply contract (the NewVersionSummary or the compact
  profile); a command may print the reply on stdout instead.

Paths the agent is told are relative to the project root when the run folder is inside it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...fsutil import atomic_write_text
from .base import AgentContext

__all__ = ["ExchangeFiles", "exchange_files", "agent_prompt_text", "skill_paths_note", "write_exchange"]

ROLE_AGENT = {"designer": "kernel-designer", "profiler": "profiler"}


@dataclasses.dataclass
class ExchangeFiles:
    dir: Path
    prompt: Path
    task: Path
    agent: Path
    reply: Path
    root: Path

    def show(self, path: Path) -> str:
        """``path`` as the agent is told it: relative to the project root when inside it."""
        p = path.resolve()
        return p.relative_to(self.root).as_posix() if p.is_relative_to(self.root) else str(p)


def exchange_files(context: AgentContext, label: str) -> ExchangeFiles:
    base = context.run_dir if context.run_dir is not None else Path(context.root) / "runs" / "_adhoc"
    d = Path(base) / "tasks" / f"{context.step_key.replace(':', '-')}-{label}"
    d.mkdir(parents=True, exist_ok=True)
    return ExchangeFiles(d, d / "prompt.md", d / "task.md", d / "agent.md", d / "reply.md",
                         Path(context.root).resolve())


def agent_prompt_text(root: Path, agent: str) -> str:
    """The system prompt of ``agents/<agent>.md`` with its preloaded skills appended (one text)."""
    from ...agentfiles import load_agent, load_skill

    path = Path(root) / "agents" / f"{agent}.md"
    if not path.exists():
        return f"You are the {agent} agent of a pytest-kforge optimisation loop; follow the task prompt exactly."
    a = load_agent(path)
    parts = [a.body.strip()]
    for s in a.skills:
        sp = Path(root) / "agents" / "skills" / s / "SKILL.md"
        if sp.exists():
            parts.append(f"# Skill /{s} (preloaded; its file is agents/skills/{s}/SKILL.md)\n\n"
                         + load_skill(sp).body.strip())
    return "\n\n".join(parts) + "\n"


def skill_paths_note(root: Path) -> str:
    """One line mapping the prompt's ``/skill`` names to files, for CLIs without Claude Code skills."""
    skills = sorted(p.parent.name for p in (Path(root) / "agents" / "skills").glob("*/SKILL.md"))
    if not skills:
        return ""
    return ("Skills named /<name> are the files agents/skills/<name>/SKILL.md (here: "
            + ", ".join(f"/{s}" for s in skills) + ").")


def write_exchange(files: ExchangeFiles, *, root: Path, role: str, prompt: str, task: str) -> None:
    """Write ``prompt.md``, ``task.md`` and ``agent.md``; clear a stale ``reply.md``."""
    reply_note = (f"\n\nWrite your reply contract, and nothing else, to {files.show(files.reply)} "
                  f"(or print it as your final message).")
    note = skill_paths_note(root)
    atomic_write_text(files.prompt, prompt.rstrip() + ("\n" + note if note else "") + reply_note + "\n")
    atomic_write_text(files.task, task.rstrip() + "\n")
    atomic_write_text(files.agent, agent_prompt_text(root, ROLE_AGENT[role]))
    if files.reply.exists():
        files.reply.unlink()
