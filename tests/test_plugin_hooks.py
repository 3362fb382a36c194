"""The plugin's own hooks (hookspec.py), implemented from a conftest.py."""

from __future__ import annotations

import json

import pytest

from test_plugin_helpers import write_tiny

CONFTEST = '''
from pytest_kforge.spec import TrialConfig

SEEN = []

def pytest_kforge_select_trials(config, kernel, trials):
    trials.append(TrialConfig("extra", {"n": 9}))

def pytest_kforge_trial_result(config, version, trial, result):
    result["from_hook"] = f"{version.name} {trial.id}"

def pytest_kforge_correctness_result(config, version, nodeid, passed, message):
    SEEN.append((version, passed))

def pytest_kforge_write_json(config, session, payload):
    payload["hooked"] = len(SEEN)
'''


def test_hooks_change_trials_rows_and_payload(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    pytester.makeconftest(CONFTEST)
    out = pytester.path / "r.json"
    result = pytester.runpytest("--kernel", "tiny:v0", "--trial", "small", "--kforge-device", "cpu",
                                "--kforge-rounds", "3", "--kforge-examples", "2", "--kforge-json", str(out), "-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*test_trial[[]tiny-v0-extra-n9[]] PASSED*"])
    data = json.loads(out.read_text())
    assert data["hooked"] == 3  # two correctness tests and one fuzz test reported
    assert sorted(r["from_hook"] for r in data["results"]) == ["v0 extra-n9", "v0 small-n256"]
