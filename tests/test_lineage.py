"""python -m pytest_kforge.lineage: the version tree, verdicts from measured figures, and --diff."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_kforge import artifacts, lineage

ROOT = Path(__file__).resolve().parents[1]


def _project(tmp: Path) -> Path:
    (tmp / "pyproject.toml").write_text("")
    k = tmp / "kernels" / "toy"
    (k / "versions").mkdir(parents=True)
    (k / "lib").mkdir()
    (k / "spec.py").write_text("SPEC = None\n")
    (k / "lib" / "host.py").write_text("X = 1\n")
    head = '"""{n}: doc."""\nLANGUAGE = "cutile-dsl"\nPARENT = {p!r}\nDESCRIPTION = "{n} line"\n'
    (k / "versions" / "v0.py").write_text(head.format(n="v0", p=None).replace("cutile-dsl", "torch") + "CONFIG = {}\n")
    (k / "versions" / "v1.py").write_text(head.format(n="v1", p="v0") + 'CONFIG = {"BLOCK": 64, "OLD": 1}\n')
    (k / "versions" / "v2.py").write_text(head.format(n="v2", p="v1") + "from kforge_kernels.toy.lib.host import X\n"
                                          'CONFIG = {"BLOCK": 128, "NEW": True}\n')
    run = tmp / "docs" / "kernels" / "runs" / "20261204-run1"
    run.mkdir(parents=True)
    rows = [{"version": v, "trial": t, "correct": True, "median_us": us}
            for v, t, us in [("v0", "decode", 100.0), ("v0", "spec", 900.0), ("v1", "decode", 50.0),
                             ("v1", "spec", 400.0), ("v2", "decode", 60.0), ("v2", "spec", 500.0)]]
    rows.append({"version": "v2", "trial": "decode", "correct": False, "median_us": 1.0})  # a wrong row never counts
    (run / "suite-all.json.gz").write_bytes(gzip.compress(json.dumps(
        {"kernel": "toy", "gpu": "NVIDIA H200", "results": rows}).encode()))
    h100 = {"kernel": "toy", "gpu": "NVIDIA H100", "results": [dict(rows[2], median_us=10.0)]}
    (run / "suite-h100.json.gz").write_bytes(gzip.compress(json.dumps(h100).encode()))
    artifacts.pack(tmp / "docs" / "kernels" / "runs" / "20261204.tar.xz", [run])  # read through the archive
    return tmp


def test_tree_reads_figures_from_archived_runs_and_marks_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    meas = lineage.measured(root, "toy")
    assert meas["v1"]["decode"] == lineage.Measure(50.0, "20261204-run1")  # the H100 file's 10.0 is another GPU
    assert meas["v2"]["decode"].us == 60.0
    assert lineage.verdicts(lineage.nodes(root / "kernels" / "toy"), meas) == {"v0": "root", "v1": "best", "v2": "no"}
    monkeypatch.chdir(root)
    assert lineage.main(["toy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].split()[:6] == ["v1", "v0", "cutile-dsl", "50.0", "400.0", "best"]
    assert out[3].split()[:6] == ["v2", "v1", "cutile-dsl", "60.0", "500.0", "no"]
    # a best record names the best: lineage marks what the orchestrator and the READMEs read, not its own ranking
    assert lineage.verdicts(lineage.nodes(root / "kernels" / "toy"), meas, "v2") == {"v0": "root", "v1": "yes",
                                                                                    "v2": "best"}


def test_diff_names_config_modules_and_code(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    assert lineage.main(["toy", "--diff", "v1", "v2"]) == 0
    out = capsys.readouterr().out
    assert "v2 descends from v1: v1 -> v2" in out
    assert "  ~ BLOCK: 64 -> 128" in out and "  - OLD = 1" in out and "  + NEW = True" in out
    assert "  + lib/host.py" in out
    assert "+from kforge_kernels.toy.lib.host import X" in out and "doc." not in out  # docstrings left out


def test_unknown_version_is_refused_with_the_list_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    with pytest.raises(SystemExit):
        lineage.main(["toy", "v9"])
    assert "v9 is not a version of toy" in capsys.readouterr().err


def test_the_repository_line_of_v59_cute(capsys: pytest.CaptureFixture[str]) -> None:
    assert lineage.main(["mla", "v59_cute", "--kernels-dir", str(ROOT / "kernels")]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:] if line.startswith("v")]
    assert names[0] == "v0" and "v35_cute" in names and names.index("v57_cute") < names.index("v59_cute")
