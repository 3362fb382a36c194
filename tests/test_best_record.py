"""One best, from one source: docs/kernels/mla/best.json is what its results give under the rule, the devlog
table is its rendering, and the orchestrator and both READMEs name its version."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_kforge.best import RULE, best_path, best_version, compute, load_best
from pytest_kforge.devlog import render_best
from pytest_kforge.orchestrate.learn import read_block
from pytest_kforge.registry import Registry
from pytest_kforge.results import load_results

ROOT = Path(__file__).resolve().parents[1]
RECORD = best_path(ROOT, "mla")


def test_the_record_is_computed_from_its_sources_by_the_rule() -> None:
    record = load_best(RECORD)
    assert record.rule == RULE and record.sources
    rows = [row for src in record.sources for row in load_results(ROOT / src).results]
    again = compute(record.kernel, rows, record.trials, gpu=record.gpu, date=record.date, command=record.command,
                    sources=record.sources, reruns=record.reruns)
    assert again.to_json() == record.to_json(), "re-run `python -m pytest_kforge.devlog best` over its sources"


def test_the_devlog_table_is_the_records_rendering() -> None:
    text = (ROOT / "docs" / "kernels" / "mla.md").read_text(encoding="utf-8")
    assert read_block(text, "best") == render_best(load_best(RECORD)).strip(), \
        "re-render it: python -m pytest_kforge.devlog render --best-json docs/kernels/mla/best.json --devlog ..."


def test_orchestrator_and_readmes_name_the_records_best() -> None:
    best = load_best(RECORD).best
    assert best is not None
    names = Registry(ROOT / "kernels").kernel("mla").version_names()
    assert best_version(RECORD, names) == best
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"Best MLA version today: (v\d+\w*)", readme).group(1) == best
    mla_readme = (ROOT / "kernels" / "mla" / "README.md").read_text(encoding="utf-8")
    assert re.search(r"best measured: `(v\d+\w*)`", mla_readme).group(1) == best
