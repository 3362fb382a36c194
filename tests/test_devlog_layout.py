"""The MLA devlog after its split: what the orchestrator parses is where it looks, and no figure was lost."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from pytest_kforge.best import best_version
from pytest_kforge.orchestrate.learn import read_block
from pytest_kforge.registry import load_kernel

ROOT = Path(__file__).resolve().parents[1]
DEVLOG = ROOT / "docs" / "kernels" / "mla.md"


def _figures_module():
    spec = importlib.util.spec_from_file_location("devlog_figures", ROOT / "scripts" / "devlog_figures.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_figure_check_finds_a_dropped_number() -> None:
    fig = _figures_module()
    old = "decode 73.1 us, spec 846.4 us (-2.8%)\n| v59_cute | 73.1 | 687 |\n"
    assert fig.missing(old, ["spec 846.4 us", "decode 73.1 us, -2.8%\n| v59 | 73.1 | 687 |"]) == {}
    assert fig.missing(old, ["decode 73.1 us\n| 73.1 | 687 |"]) == {"846.4 us": 1, "-2.8%": 1}


def test_devlog_blocks_entries_and_run_links() -> None:
    text = DEVLOG.read_text(encoding="utf-8")
    names = load_kernel("mla", ROOT / "kernels").version_names()
    assert best_version(DEVLOG.parent / "mla" / "best.json", names) in names  # best is data, next to the devlog
    for block in ("overview", "best", "peers", "perf"):
        assert read_block(text, block), block
    assert text.index("<!-- kforge:perf:end -->") < text.index("## Versions")  # the orchestrator appends below it
    entries = re.findall(r"^### (v\d+(?:_[a-z0-9_]+)?) \(", text, re.MULTILINE)
    assert sorted(entries) == sorted(names)  # one entry per version
    for link in re.findall(r"\]\((mla/runs/[^)]+\.md)\)", text):
        assert (DEVLOG.parent / link).is_file(), link
