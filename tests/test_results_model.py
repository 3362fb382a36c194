"""The typed results model reads every results JSON the project has committed, and round-trips it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_kforge import artifacts
from pytest_kforge.results import SCHEMA_VERSION, ResultsError, RunResults, TrialResult, load_results

RUNS = Path(__file__).resolve().parents[1] / "docs" / "kernels" / "runs"


def _raw(path: Path) -> object:
    raw = artifacts.read_bytes(path)  # loose, or packed into a day's .tar.xz (the artifact policy)
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _results_files() -> list[Path]:
    found = []
    seen: set[str] = set()
    for p in artifacts.glob(RUNS, "*/*.json*"):
        key = str(p).removesuffix(".gz")  # an archived x.json is listed as x.json and as x.json.gz
        if ".partial.jsonl" in p.name or key in seen:
            continue
        seen.add(key)
        data = _raw(p)
        if isinstance(data, dict) and "results" in data:
            found.append(p)
    return found


def test_every_committed_results_json_loads_and_round_trips() -> None:
    files = _results_files()
    assert len(files) >= 20  # runs 19-30 (runs 1-18: archives that left the tree, docs/kernels/runs/README.md)
    for path in files:
        data = _raw(path)
        run = load_results(path)
        assert run.schema_version == data.get("schema_version", 1)
        back = run.to_json()
        if "schema_version" not in data:  # a run 1-28 file: unversioned, read as version 1
            back.pop("schema_version")
        assert {k: v for k, v in back.items() if v is not None or k in data} == data, path


def test_runs_27_and_28_load_with_their_newest_fields() -> None:
    run27 = [load_results(p) for p in artifacts.glob(RUNS / "20261204-h200-run27", "suite-*.json.gz")]
    assert sum(len(r.results) for r in run27) == 144 and all(r.gpu == "NVIDIA H200" for r in run27)
    assert all(row.host_us is not None for r in run27 for row in r.results if row.median_us is not None)
    run28 = load_results(RUNS / "20261205-h100-run28" / "suite-all-v0-v11.json.gz")
    assert run28.gpu.startswith("NVIDIA H100") and any(row.b2b_us for row in run28.results)


def test_journal_lines_of_killed_runs_are_rows_too() -> None:
    paths = artifacts.glob(RUNS, "*/*.partial.jsonl.gz")
    assert paths  # the killed runs' journals are committed (packed)
    for path in paths:
        lines = [json.loads(x) for x in gzip.decompress(artifacts.read_bytes(path)).decode().splitlines() if x.strip()]
        assert lines and all(TrialResult.from_json(x["result"]).version for x in lines)


def test_unknown_keys_survive_and_a_newer_schema_is_refused() -> None:
    row = {"version": "v1", "trial": "decode", "id": "decode-b1", "profile": "reports/x.ncu-rep"}
    assert TrialResult.from_json(row).to_json()["profile"] == "reports/x.ncu-rep"
    with pytest.raises(ResultsError, match="newer than this pytest-kforge reads"):
        RunResults.from_json({"schema_version": SCHEMA_VERSION + 1, "results": []})
    with pytest.raises(ResultsError, match="lacks trial"):
        TrialResult.from_json({"version": "v1", "id": "x"})


def test_an_unreadable_file_is_one_sentence_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("[1]")
    with pytest.raises(ResultsError, match=r"cannot read .*x\.json: not a results JSON"):
        load_results(bad)
