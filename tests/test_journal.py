"""The results journal (``--kforge-json PATH`` -> ``PATH.partial.jsonl``): timings survive a killed run."""

from __future__ import annotations

import json

import pytest

from pytest_kforge import journal
from test_plugin_helpers import write_tiny

CPU = ("--kforge-device", "cpu", "--kforge-rounds", "5", "--kforge-warmup", "1", "--kforge-examples", "2")

# kills the pytest process the moment the second trial result arrives (before it is stored)
KILLER = '''
import os
SEEN = []

def pytest_kforge_trial_result(config, version, trial, result):
    SEEN.append(result)
    if len(SEEN) == 2:
        os._exit(9)
'''


def test_complete_run_writes_json_and_removes_the_journal(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    out = pytester.path / "suite.json"
    pytester.runpytest("--kernel", "tiny:v0", *CPU, "--kforge-json", str(out)).assert_outcomes(passed=5)
    assert len(json.loads(out.read_text())["results"]) == 2
    assert not journal.journal_path(out).exists()


def test_killed_run_keeps_finished_timings_in_the_journal(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    pytester.makeconftest(KILLER)
    out = pytester.path / "suite.json"
    res = pytester.runpytest_subprocess("--kernel", "tiny:v0", *CPU, "--kforge-json", str(out))
    assert res.ret == 9 and not out.exists()
    jpath = journal.journal_path(out)
    with jpath.open("a") as fh:
        fh.write('{"meta": {}, "resu')  # a line torn by the kill
    assert journal.main([str(jpath), str(pytester.path / "recovered.json")]) == 0
    rec = json.loads((pytester.path / "recovered.json").read_text())
    assert rec["partial"] is True and rec["kernel"] == "tiny" and rec["device"] == "cpu"
    assert [r["id"] for r in rec["results"]] == ["small-n256"] and rec["results"][0]["median_us"] > 0


def test_recover_cli_says_what_is_missing(tmp_path, capsys) -> None:
    assert journal.main([str(tmp_path / "none.jsonl"), str(tmp_path / "o.json")]) == 2
    assert "no journal" in capsys.readouterr().err
    assert journal.main([]) == 2
