"""End to end: the real harness (plus the kforge_trust plugin) must catch every cheating version.

One in-process pytester run of the harness covers the whole ``cheat`` kernel
(tests/adversarial/kernels/cheat: a tiny row softmax whose v1..v9 each cheat one way) on CPU with
timing (``--kforge-device cpu``); each test below asserts that one cheat made at least one of its tests fail,
with the reason expected.  Only the non-torch v4 is read by the static check, so every
other cheat is caught by the harness's own run-time checks (plus the trust plugin's return check).  ``v0`` is honest
and must pass, so the suite can tell the difference.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - imported before pytester snapshots sys.modules: torch cannot be imported twice

HERE = Path(__file__).resolve().parent


def _plugin_args() -> list[str]:
    eps = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    loaded = set(sys.modules)
    core = "pytest_kforge.plugin" in eps or "pytest_kforge.plugin" in loaded
    return ([] if core else ["-p", "pytest_kforge.plugin"]) + (
        [] if "pytest_kforge.trust.plugin" in eps else ["-p", "pytest_kforge.trust.plugin"])


def _outcome(rep: pytest.TestReport) -> tuple[str, str]:
    if rep.failed:
        return ("failure" if rep.when == "call" else "error"), rep.longreprtext
    if rep.skipped:
        return "skipped", rep.longreprtext
    return "passed", ""


_RESULTS: dict[str, dict[str, tuple[str, str]]] = {}


def _run(pytester: pytest.Pytester, kernel: str) -> dict[str, tuple[str, str]]:
    """Run the real harness in-process on ``kernel``; test name -> (outcome, message)."""
    if kernel in _RESULTS:  # one harness run per kernel serves every test of this module
        return _RESULTS[kernel]
    shutil.copytree(HERE / "kernels" / kernel, pytester.path / "kernels" / kernel)
    pytester.makefile(".toml", pyproject='[tool.kforge]\nkernels_dir = "kernels"\n')
    reports: list[pytest.TestReport] = []

    class Recorder:
        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            reports.append(report)

    pytester.inline_run(*_plugin_args(), "--noconftest", "-p", "no:cacheprovider", "--kernel", kernel,
                              "--kernel-version", "all", "--kforge-device", "cpu", "--kforge-rounds", "5",
                              "--kforge-warmup", "1", "--kforge-seed", "1234", "--kforge-trust", "strict",
                        plugins=[Recorder()])
    out: dict[str, tuple[str, str]] = {}
    for rep in reports:
        name = rep.nodeid.rpartition("::")[2]
        if name not in out or out[name][0] == "passed":  # keep the first failure (setup or call)
            out[name] = _outcome(rep)
    if not out:
        pytest.fail(f"the harness ran no tests for {kernel}")
    _RESULTS[kernel] = out
    return out


@pytest.fixture()
def runs(pytester: pytest.Pytester) -> dict[str, dict[str, tuple[str, str]]]:
    return {"strict": _run(pytester, "cheat"), "floor": _run(pytester, "floorcheat")}


def _of(results: dict[str, tuple[str, str]], version: str) -> dict[str, tuple[str, str]]:
    return {name: r for name, r in results.items() if f"-{version}-" in name or name.endswith(f"-{version}]")}


def _caught(results: dict[str, tuple[str, str]], version: str, *needles: str) -> str:
    mine = _of(results, version)
    assert mine, f"no tests were generated for {version}: {sorted(results)}"
    bad = [msg for outcome, msg in mine.values() if outcome in ("failure", "error")]
    assert bad, f"{version} cheated and passed everything: {mine}"
    text = "\n".join(bad)
    assert any(n in text for n in needles), f"{version} failed, but not for the expected reason: {text[:2000]}"
    return text


def test_honest_version_passes(runs):
    for mode in ("strict", "floor"):
        mine = {n: r for n, r in _of(runs[mode], "v0").items() if mode == "strict" or "correctness" in n}
        assert mine and all(o in ("passed", "skipped") for o, _ in mine.values()), mine
        assert any(o == "passed" for o, _ in mine.values())


def test_shape_keyed_cache_is_caught(runs):
    _caught(runs["strict"], "v1_shapecache", "cached across calls", "after timing, on fresh inputs", "static cheat check")


def test_pointer_keyed_cache_is_caught(runs):
    # needs the harness: the post-benchmark re-check must refill the *timed* input buffers in place
    _caught(runs["strict"], "v2_ptrcache", "after timing")


def test_fingerprint_cache_is_caught(runs):
    # needs the harness: the post-benchmark re-check must also perturb the timed inputs in place
    _caught(runs["strict"], "v3_fingerprint", "after timing")


def test_reference_in_dsl_version_is_caught_statically(runs):
    text = _caught(runs["strict"], "v4_reference", "static cheat check")
    assert "[reference]" in text


def test_partial_write_is_caught(runs):
    _caught(runs["strict"], "v5_partial", "NaN")


def test_side_stream_is_caught(runs):
    _caught(runs["strict"], "v6_sidestream", "outside the timed stream", "side stream", "NaN")


def test_lazy_result_is_caught(runs):
    _caught(runs["strict"], "v7_lazy", "not the plain torch.Tensor")


def test_input_mutation_is_caught(runs):
    _caught(runs["strict"], "v8_mutate", "modified its input", "was modified in place")


def test_foreign_output_is_caught(runs):
    _caught(runs["strict"], "v9_other", "not the output buffer")


def test_faster_than_floor_is_rejected(runs):
    mine = _of(runs["floor"], "v0")
    trials = {n: r for n, r in mine.items() if n.startswith("test_trial")}
    assert trials and all(o == "failure" for o, _ in trials.values()), trials
    assert all("floor" in m for _, m in trials.values())
