"""Agent and skill files in Claude Code's format, and their export to ``.claude/``.

* ``agents/<name>.md``: YAML front matter ``name, description, tools, model`` (optionally
  ``skills``, the skills preloaded into the agent) and a body that is the system prompt;
* ``agents/skills/<name>/SKILL.md``: front matter ``name, description`` and the skill's body.

kforge's own orchestrator reads these files; ``python -m pytest_kforge.agentfiles export-claude``
links them into ``.claude/agents`` and ``.claude/skills`` so Claude Code (and the agent SDK) use
the very same files unchanged.  ``python -m pytest_kforge.agentfiles validate`` checks them.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import KforgeError

__all__ = ["AgentFile", "SkillFile", "AgentFileError", "load_agent", "load_skill", "load_agents", "load_skills",
           "validate", "export_claude", "KNOWN_TOOLS", "MODEL_ALIASES"]

_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
#: Claude Code tool names an agent may list in ``tools``
KNOWN_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "Grep", "Glob", "Bash", "Skill", "Task", "Agent",
                         "WebFetch", "WebSearch", "NotebookEdit", "TodoWrite", "BashOutput", "KillShell"})
MODEL_ALIASES = frozenset({"sonnet", "opus", "haiku", "inherit"})


class AgentFileError(KforgeError, ValueError):
    """A malformed agent or skill file."""


def _split(text: str, path: Path) -> tuple[dict[str, Any], str]:
    m = re.match(r"^---[ \t]*\n(.*?)\n---[ \t]*\n?", text, re.S)
    if not m:
        raise AgentFileError(f"{path} has no YAML front matter; start it with '---', name/description lines, '---'")
    import yaml

    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        raise AgentFileError(f"{path} front matter is not valid YAML ({str(exc).splitlines()[0]}); fix it") from None
    if not isinstance(meta, dict):
        raise AgentFileError(f"{path} front matter is not a mapping; write `key: value` lines")
    return meta, text[m.end():].strip()


def _names(value: Any) -> tuple[str, ...]:
    """``"Read, Grep"`` or ``[Read, Grep]`` -> ``("Read", "Grep")``."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, list) else [value]
    return tuple(str(x).strip() for x in items if str(x).strip())


def _need(meta: dict[str, Any], key: str, path: Path) -> str:
    v = meta.get(key)
    if not isinstance(v, str) or not v.strip():
        raise AgentFileError(f"{path} front matter has no `{key}`; add `{key}: ...`")
    return v.strip()


@dataclasses.dataclass(frozen=True)
class AgentFile:
    """A subagent: ``body`` is its system prompt; ``skills`` are preloaded into it."""

    name: str
    description: str
    tools: tuple[str, ...]
    model: str | None
    skills: tuple[str, ...]
    body: str
    path: Path
    meta: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class SkillFile:
    name: str
    description: str
    body: str
    path: Path
    meta: dict[str, Any]


def load_agent(path: str | Path) -> AgentFile:
    path = Path(path)
    meta, body = _split(path.read_text(encoding="utf-8"), path)
    model = meta.get("model")
    return AgentFile(_need(meta, "name", path), _need(meta, "description", path), _names(meta.get("tools")),
                     str(model) if model is not None else None, _names(meta.get("skills")), body, path, meta)


def load_skill(path: str | Path) -> SkillFile:
    path = Path(path)
    meta, body = _split(path.read_text(encoding="utf-8"), path)
    return SkillFile(_need(meta, "name", path), _need(meta, "description", path), body, path, meta)


def load_agents(agents_dir: str | Path = "agents") -> dict[str, AgentFile]:
    return {a.name: a for a in (load_agent(p) for p in sorted(Path(agents_dir).glob("*.md")))}


def load_skills(skills_dir: str | Path = "agents/skills") -> dict[str, SkillFile]:
    return {s.name: s for s in (load_skill(p) for p in sorted(Path(skills_dir).glob("*/SKILL.md")))}


def validate(root: str | Path = ".") -> list[str]:
    """Every problem with ``<root>/agents/*.md`` and ``<root>/agents/skills/*/SKILL.md`` (empty if none)."""
    root = Path(root)
    probs: list[str] = []
    skills: dict[str, SkillFile] = {}
    for p in sorted((root / "agents" / "skills").glob("*/SKILL.md")):
        try:
            s = load_skill(p)
        except AgentFileError as exc:
            probs.append(str(exc))
            continue
        if s.name != p.parent.name or not _NAME_RE.match(s.name) or len(s.name) > 64:
            probs.append(f"{p}: name {s.name!r} must be lower-case-hyphenated, at most 64 characters, and equal "
                         f"the folder name {p.parent.name!r}")
        if len(s.description) > 1024:
            probs.append(f"{p}: description has {len(s.description)} characters; keep it within 1024")
        if len(s.body) > 20000:  # ~5k tokens: skills are loaded whole
            probs.append(f"{p}: body has {len(s.body)} characters; keep a skill under ~20000 (about 5k tokens)")
        skills[s.name] = s
    for p in sorted((root / "agents").glob("*.md")):
        try:
            a = load_agent(p)
        except AgentFileError as exc:
            probs.append(str(exc))
            continue
        if a.name != p.stem or not _NAME_RE.match(a.name):
            probs.append(f"{p}: name {a.name!r} must be lower-case-hyphenated and equal the file name {p.stem!r}")
        unknown = [t for t in a.tools if t.split("(")[0] not in KNOWN_TOOLS and not t.startswith("mcp__")]
        if unknown:
            probs.append(f"{p}: unknown tool(s) {', '.join(unknown)}; Claude Code tools are "
                         f"{', '.join(sorted(KNOWN_TOOLS))}")
        if a.model is not None and a.model not in MODEL_ALIASES and not a.model.startswith("claude-"):
            probs.append(f"{p}: model {a.model!r} is not {', '.join(sorted(MODEL_ALIASES))} or a claude-* model id")
        for name in a.skills:
            if name not in skills:
                probs.append(f"{p}: preloads skill {name!r}, but agents/skills/{name}/SKILL.md does not exist")
        if not a.body:
            probs.append(f"{p}: the body (system prompt) is empty")
    return probs


def _place(src: Path, link: Path, *, copy: bool, force: bool) -> str:
    """Make ``link`` a relative symlink to (or a copy of) ``src``; returns what was done."""
    rel = os.path.relpath(src, link.parent)
    if link.is_symlink():
        if not copy and os.readlink(link) == rel:
            return "ok"
        link.unlink()
    elif link.exists():
        if not force:
            raise AgentFileError(f"{link} exists and is not a link kforge made; move it away or pass --force")
        shutil.rmtree(link) if link.is_dir() else link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    if copy:
        shutil.copytree(src, link) if src.is_dir() else shutil.copy2(src, link)
        return "copied"
    link.symlink_to(rel, target_is_directory=src.is_dir())
    return "linked"


def export_claude(root: str | Path = ".", dest: str | Path | None = None, *, copy: bool = False,
                  force: bool = False) -> list[tuple[Path, str]]:
    """Link (or copy) every agent to ``<dest>/agents/<name>.md`` and skill to ``<dest>/skills/<name>``.

    ``dest`` defaults to ``<root>/.claude``.  Symlinks are relative, so the checkout can move.
    Existing files that are not kforge's links are left alone unless ``force``.
    """
    root = Path(root).resolve()
    dest = Path(dest).resolve() if dest is not None else root / ".claude"
    probs = validate(root)
    if probs:
        raise AgentFileError(f"agent files have {len(probs)} problem(s), the first: {probs[0]}")
    done: list[tuple[Path, str]] = []
    for p in sorted((root / "agents").glob("*.md")):
        link = dest / "agents" / p.name
        done.append((link, _place(p, link, copy=copy, force=force)))
    for p in sorted((root / "agents" / "skills").glob("*/SKILL.md")):
        link = dest / "skills" / p.parent.name
        done.append((link, _place(p.parent, link, copy=copy, force=force)))
    return done


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.agentfiles", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="project root holding agents/ (default: .)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export-claude", help="link agents/ and agents/skills/ into .claude/ for Claude Code")
    ex.add_argument("--dest", default=None, help="target folder (default: <root>/.claude)")
    ex.add_argument("--copy", action="store_true", help="copy instead of symlinking (e.g. on Windows)")
    ex.add_argument("--force", action="store_true", help="replace existing files that are not kforge links")
    sub.add_parser("validate", help="check every agent and skill file; exit 1 on a problem")
    a = ap.parse_args(argv)
    if a.cmd == "validate":
        probs = validate(a.root)
        print("\n".join(probs) if probs else "ok: agent and skill files are valid")
        return 1 if probs else 0
    try:
        done = export_claude(a.root, a.dest, copy=a.copy, force=a.force)
    except AgentFileError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    for link, what in done:
        print(f"{what:7s} {link}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
