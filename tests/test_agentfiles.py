"""Agent and skill files: they parse, carry their contracts, and export to .claude/ for Claude Code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_kforge.agentfiles import AgentFileError, export_claude, load_agent, load_agents, load_skills, main, validate
from pytest_kforge.contracts import (
    Constraints, NewVersionSummary, OptimizationTask, PlannedOptimization, ProfileContract, StageRow, TrialCheck,
)

REPO = Path(__file__).resolve().parents[1]
SKILLS = {"profile-kernel", "design-kernel", "design-cutile-dsl-kernel", "design-cute-dsl-kernel",
          "optimization-catalog"}


def _static_lines(text: str) -> list[str]:
    """Contract lines without values: headings without placeholders and table headers/separators."""
    return [ln for ln in text.splitlines()
            if ln.startswith("|") and not any(ch.isdigit() for ch in ln) or ln in (
                "### Stages", "### Top 3 Opportunities (ranked by estimated impact)", "### vs Baseline (if applicable)",
                "### Constraints", "### Trial Configurations Checked", "### Optimizations to Apply:")]


def test_real_agent_and_skill_files_are_valid() -> None:
    assert validate(REPO) == []
    agents = load_agents(REPO / "agents")
    skills = load_skills(REPO / "agents" / "skills")
    assert set(agents) == {"profiler", "kernel-designer"} and set(skills) == SKILLS
    assert agents["profiler"].skills == ("profile-kernel",)
    assert agents["kernel-designer"].skills == ("design-kernel",)
    assert "Skill" in agents["kernel-designer"].tools and agents["profiler"].model == "sonnet"
    for a in agents.values():
        assert a.description and a.body and a.tools


def test_prompts_carry_the_contracts_verbatim() -> None:
    prof = load_agent(REPO / "agents" / "profiler.md").body
    profile = ProfileContract("k", "v1", {"b": 1, "s": 1, "t": 1}, [StageRow("a", 1, 1, 1, 1, "Memory", "x")],
                              "Memory", "r", baseline=[])
    text = profile.render() + "\n### vs Baseline (if applicable)\n| Metric | Previous | Current | Change |\n" \
                              "|--------|----------|---------|--------|\n"
    for line in _static_lines(text):
        assert line in prof, line
    assert "Profile <kernel> <version> at b=X, s=X, t=X.\nReturn compact summary per the output contract.\n" \
           "Update the devlog performance section in docs/kernels/<kernel>.md." in prof

    des = load_agent(REPO / "agents" / "kernel-designer.md").body
    summary = NewVersionSummary("k", "v2", ["a"], [], [], "PASS", [TrialCheck(1, 1, 1, "w")], "d.md")
    for line in _static_lines(summary.render()):
        assert line in des, line
    for head in ("## New Version:", "### Changes Applied:", "### Files: Created:", "### Correctness: [PASS/FAIL]",
                 "### Devlog Entry Written:", "Load /design-<language>-kernel and the matching reference skill"):
        assert head in des, head

    design = (REPO / "agents" / "skills" / "design-kernel" / "SKILL.md").read_text()
    task = OptimizationTask("k", "v1", "v2", "b", [PlannedOptimization("a", "b")], Constraints("1", "2", "3", "4"))
    for line in task.render().splitlines():
        if line.startswith("- ") and ":" in line:
            assert line.split(":")[0] + ": [...]" in design, line
    assert "## Optimization Task: [kernel] [current] -> [new_version]" in design
    assert "10,000" in design and "one hour" in design


def test_language_skills_name_the_toolchain_traps() -> None:
    cutile = (REPO / "agents" / "skills" / "design-cutile-dsl-kernel" / "SKILL.md").read_text()
    for fact in ("13.3", "libnvvm", "exit code 5", "failed to compile Tile IR program", "powers of two", "[local]"):
        assert fact in cutile, fact
    cute = (REPO / "agents" / "skills" / "design-cute-dsl-kernel" / "SKILL.md").read_text()
    for fact in ("dsl_packages", "sm_90a", "cute.compile", "wgmma", "TMA", "[external]"):
        assert fact in cute, fact


def _tree(tmp: Path) -> Path:
    root = tmp / "proj"
    shutil.copytree(REPO / "agents", root / "agents")
    return root


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda r: (r / "agents" / "profiler.md").write_text("no front matter\n"), "no YAML front matter"),
    (lambda r: (r / "agents" / "profiler.md").write_text("---\nname: profiler\n---\nbody\n"), "no `description`"),
    (lambda r: (r / "agents" / "profiler.md").write_text(
        "---\nname: profiler2\ndescription: d\n---\nbody\n"), "equal the file name"),
    (lambda r: (r / "agents" / "profiler.md").write_text(
        "---\nname: profiler\ndescription: d\nskills: [nope]\n---\nbody\n"), "preloads skill 'nope'"),
    (lambda r: (r / "agents" / "profiler.md").write_text(
        "---\nname: profiler\ndescription: d\ntools: Read, Teleport\n---\nbody\n"), "unknown tool(s) Teleport"),
    (lambda r: (r / "agents" / "skills" / "design-kernel" / "SKILL.md").write_text(
        "---\nname: design\ndescription: d\n---\nbody\n"), "equal the folder name"),
])
def test_malformed_files_fail(tmp_path: Path, mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    root = _tree(tmp_path)
    mutate(root)
    probs = validate(root)
    assert any(needle in p for p in probs), probs
    with pytest.raises(AgentFileError):
        export_claude(root)


def test_export_claude_links_the_same_files(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert main(["--root", str(root), "export-claude"]) == 0
    claude = root / ".claude"
    for name in ("profiler", "kernel-designer"):
        link = claude / "agents" / f"{name}.md"
        assert link.is_symlink() and not Path(link.readlink()).is_absolute()
        assert link.resolve() == (root / "agents" / f"{name}.md").resolve()
        assert load_agent(link).name == name
    for name in SKILLS:
        assert (claude / "skills" / name / "SKILL.md").read_text() == \
            (root / "agents" / "skills" / name / "SKILL.md").read_text()
    # edits to the source show through the link (same files, unchanged)
    (root / "agents" / "profiler.md").write_text((root / "agents" / "profiler.md").read_text() + "\nExtra.\n")
    assert (claude / "agents" / "profiler.md").read_text().endswith("Extra.\n")
    # idempotent; a moved checkout keeps working because links are relative
    assert [w for _, w in export_claude(root)] == ["ok"] * (2 + len(SKILLS))
    moved = tmp_path / "moved"
    shutil.move(str(root), moved)
    assert load_agent(moved / ".claude" / "agents" / "profiler.md").name == "profiler"


def test_export_refuses_to_clobber_and_copy_mode(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    dest = tmp_path / "elsewhere" / ".claude"
    (dest / "agents").mkdir(parents=True)
    (dest / "agents" / "profiler.md").write_text("mine")
    with pytest.raises(AgentFileError, match="not a link kforge made"):
        export_claude(root, dest)
    assert (dest / "agents" / "profiler.md").read_text() == "mine"
    done = export_claude(root, dest, copy=True, force=True)
    assert {w for _, w in done} == {"copied"}
    assert not (dest / "agents" / "profiler.md").is_symlink()
    assert load_agent(dest / "agents" / "profiler.md").skills == ("profile-kernel",)
    assert (dest / "skills" / "design-kernel" / "SKILL.md").is_file()
