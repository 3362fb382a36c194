"""Deliberately bad torch versions must fail, each with a message naming what it did wrong."""

from __future__ import annotations

import pytest

from test_plugin_helpers import write_tiny

EXPECTED = {
    "v1_nowrite": "y: 256 of 256 elements are NaN/Inf (unwritten or overflowed), first at index (0,)",
    "v2_fresh": "v2_fresh returned a tensor for 'y' that is not the output buffer passed in",
    "v3_mutate": "v3_mutate modified its input 'x'; inputs must be read-only",
    "v4_cache": "call 2 of 2 (seed *, reusing the output buffers): y: max abs error * (the first call passed: "
                "outputs look cached across calls)",
    "v5_wrong": "y: max abs error 0.01 at index (*) (got *, want *), rel L2 error *; limits max_abs 1e-05, "
                "rel_l2 1e-06",
}


def test_each_bad_version_fails_for_its_reason(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, tuple(EXPECTED))
    result = pytester.runpytest("--kernel", "tiny:" + ",".join(["v0", *EXPECTED]), "--trial", "small",
                                "--kforge-no-bench", "--kforge-examples", "3", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=10)  # v0: correctness + fuzz; each bad one fails both
    for version, message in EXPECTED.items():
        result.stdout.fnmatch_lines([f"*test_correctness[[]tiny-{version}-small-n256[]]*", f"*{message}*"],
                                    consecutive=False)
        result.stdout.fnmatch_lines([f"FAILED *test_fuzz[[]tiny-{version}[]]*"])


def test_correctness_results_recorded_in_json(pytester: pytest.Pytester) -> None:
    import json

    write_tiny(pytester.path, ("v5_wrong",))
    out = pytester.path / "out" / "suite.json"
    pytester.runpytest("--kernel", "tiny", "--trial", "small", "--kforge-no-bench", "--kforge-examples", "2",
                       "--kforge-json", str(out), "--kforge-seed", "7")
    data = json.loads(out.read_text())
    assert data["kernel"] == "tiny" and data["seed"] == 7 and data["gpu"] is None
    assert data["roofline"] == {"tbs": 4.3, "tflops": 790.0}
    rows = {(c["version"], c["test"].rpartition("::")[2]): c for c in data["correctness"]}
    assert rows[("v0", "test_correctness[tiny-v0-small-n256]")]["passed"] is True
    bad = rows[("v5_wrong", "test_correctness[tiny-v5_wrong-small-n256]")]
    assert bad["passed"] is False and "max abs error 0.01" in bad["message"]
    assert rows[("v5_wrong", "test_fuzz[tiny-v5_wrong]")]["passed"] is False
