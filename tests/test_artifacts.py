"""Packed run artifacts read as if loose (pytest_kforge.artifacts)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_kforge import artifacts
from pytest_kforge.profile.report import load_report_json


def _run_folder(root: Path) -> Path:
    run = root / "runs" / "20261204-run27"
    (run / "sub").mkdir(parents=True)
    (run / "suite.json.gz").write_bytes(gzip.compress(b'{"results": [1]}'))
    (run / "sub" / "call.log").write_text("decode 73.1 us\n")
    (run / "summary.md").write_text("# run 27\n")
    return run


def test_pack_keeps_summaries_loose_and_reads_raw_files_back_through_the_archive(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    archive = tmp_path / "runs" / "20261204.tar.xz"
    packed = artifacts.pack(archive, [run])
    assert sorted(p.name for p in packed) == ["call.log", "suite.json.gz"]
    assert (run / "summary.md").exists() and not (run / "suite.json.gz").exists()
    assert artifacts.list_members(archive) == ["20261204-run27/sub/call.log", "20261204-run27/suite.json"]
    assert artifacts.exists(run / "suite.json.gz") and artifacts.exists(run / "suite.json")
    assert gzip.decompress(artifacts.read_bytes(run / "suite.json.gz")) == b'{"results": [1]}'
    assert artifacts.read_bytes(run / "sub" / "call.log") == b"decode 73.1 us\n"
    assert artifacts.glob(tmp_path / "runs", "*/suite*.json.gz") == [run / "suite.json.gz"]
    assert not artifacts.exists(run / "other.log")
    with pytest.raises(FileNotFoundError, match="neither on disk nor in a .tar.xz"):
        artifacts.read_bytes(run / "other.log")


def test_pack_adds_to_an_archive_and_refuses_a_different_file_of_the_same_name(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    archive = tmp_path / "runs" / "20261204.tar.xz"
    artifacts.pack(archive, [run])
    (run / "late.json").write_text("{}")
    artifacts.pack(archive, [run])
    assert "20261204-run27/late.json" in artifacts.list_members(archive)
    (run / "suite.json").write_text('{"results": [2]}')
    with pytest.raises(ValueError, match="already holds a different"):
        artifacts.pack(archive, [run])
    assert (run / "suite.json").exists()  # nothing removed on a refusal
    out = tmp_path / "out"
    assert artifacts.extract(archive, out) == 3 and (out / "20261204-run27" / "sub" / "call.log").exists()


def test_a_profile_twin_in_a_reports_archive_is_loaded(tmp_path: Path) -> None:
    twin = tmp_path / "reports" / "mla" / "v1" / "decode.json.gz"
    twin.parent.mkdir(parents=True)
    twin.write_bytes(gzip.compress(json.dumps({"version": "v1"}).encode()))
    artifacts.pack(tmp_path / "reports" / "mla" / "raw.tar.xz", [twin.parent])
    assert not twin.exists()
    assert load_report_json(twin) == {"version": "v1"}
    assert load_report_json(twin.with_suffix("")) == {"version": "v1"}  # decode.json falls back to the .gz


def test_the_cli_refuses_a_folder_outside_the_archive_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path)
    with pytest.raises(SystemExit):
        artifacts.main(["pack", str(run / "x.tar.xz"), str(tmp_path / "runs")])
    assert "at or below the archive's folder" in capsys.readouterr().err


def test_restore_brings_back_an_archive_that_left_the_tree(tmp_path: Path) -> None:
    import subprocess

    from pytest_kforge import artifacts as art

    def git(*a: str) -> None:
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "runs").mkdir()
    arc = tmp_path / "runs" / "20261203.tar.xz"
    arc.write_bytes(b"packed bytes")
    git("add", ".")
    git("commit", "-qm", "add")
    git("rm", "-q", "runs/20261203.tar.xz")
    git("commit", "-qm", "move out")
    assert not arc.exists()
    assert art.restore(arc).endswith("^")
    assert arc.read_bytes() == b"packed bytes"
    with pytest.raises(FileNotFoundError, match="no commit of this clone removed"):
        art.restore(tmp_path / "runs" / "20261204.tar.xz")
