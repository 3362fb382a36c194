"""Collection of the generated suite: ids, version selection, skips with one-line reasons, summary."""

from __future__ import annotations

import pytest

from test_plugin_helpers import write_tiny

FAST = ("--kforge-examples", "2", "--kforge-rounds", "3", "--kforge-warmup", "0")


def test_ids_for_all_versions_and_trials(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v0", "v5_wrong"))
    result = pytester.runpytest("--kernel", "tiny", "--kernel-version", "all", "--collect-only", "-q")
    ids = [line.split("::")[1] for line in result.stdout.lines if "::" in line]
    assert ids == [
        "test_correctness[tiny-v0-small-n256]", "test_correctness[tiny-v0-big-n4096]",
        "test_correctness[tiny-v5_wrong-small-n256]", "test_correctness[tiny-v5_wrong-big-n4096]",
        "test_fuzz[tiny-v0]", "test_fuzz[tiny-v5_wrong]",
        "test_trial[tiny-v0-small-n256]", "test_trial[tiny-v0-big-n4096]",
        "test_trial[tiny-v5_wrong-small-n256]", "test_trial[tiny-v5_wrong-big-n4096]",
    ]


def test_kernel_colon_version_list_and_trial_pick(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v0", "v5_wrong", "v6_picky"))
    result = pytester.runpytest("--kernel", "tiny:v0,v6_picky", "--trial", "odd", "--collect-only", "-q")
    ids = [line.split("::")[1] for line in result.stdout.lines if "::" in line]
    assert ids == ["test_correctness[tiny-v0-odd-n333]", "test_correctness[tiny-v6_picky-odd-n333]",
                   "test_fuzz[tiny-v0]", "test_fuzz[tiny-v6_picky]",
                   "test_trial[tiny-v0-odd-n333]", "test_trial[tiny-v6_picky-odd-n333]"]


def test_no_bench_and_only_suite_runs_without_paths(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    pytester.makepyfile(test_other="def test_unrelated():\n    assert False\n")
    result = pytester.runpytest("--kernel", "tiny:v0", "--kforge-no-bench", *FAST)
    result.assert_outcomes(passed=3)  # the project's own tests are not run by a --kernel job
    both = pytester.runpytest("--kernel", "tiny:v0", "--kforge-no-bench", "test_other.py", *FAST)
    both.assert_outcomes(passed=3, failed=1)


def test_trial_matrix_and_default_trials_from_config(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, toml='trials = ["odd"]\n[trial_matrix.tiny]\nodd = {n = 77}\nnew = {n = 5}\n')
    result = pytester.runpytest("--kernel", "tiny:v0", "--collect-only", "-q")
    ids = [line.split("::")[1] for line in result.stdout.lines if "::" in line]
    assert ids == ["test_correctness[tiny-v0-odd-n77]", "test_fuzz[tiny-v0]", "test_trial[tiny-v0-odd-n77]"]


def test_cpu_run_skips_dsl_and_trials_with_one_line_each(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v0", "v7_tile"))
    result = pytester.runpytest("--kernel", "tiny", "-rs", *FAST)
    result.assert_outcomes(passed=3, skipped=7)
    out = result.stdout.str()
    assert ("tiny v7_tile is written in cutile-dsl, but `import cuda.tile` failed; install it with "
            "`pip install -e \".[gpu]\"`") in out
    assert "timing tiny v0 needs a CUDA GPU, but torch.cuda.is_available() is False here" in out
    result.stdout.fnmatch_lines([
        "kforge tiny v0,v7_tile on cpu (seed *): ran correctness 2 passed; fuzz 1 passed; skipped 7: "
        "5 x tiny v7_tile is written in cutile-dsl* | 2 x timing tiny v0 needs a CUDA GPU*",
    ])


def test_supports_reason_skips(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v6_picky",))
    result = pytester.runpytest("--kernel", "tiny:v6_picky", "--kforge-device", "cpu", "-rs", *FAST)
    result.assert_outcomes(passed=3, skipped=2)
    result.stdout.fnmatch_lines(["*tiny v6_picky does not support {'n': 4096}: n must be <= 300*"])


def test_real_kernels_v0_on_cpu(pytester: pytest.Pytester) -> None:
    """The shipped softmax and mla v0 pass their (CPU-shrunk) correctness suites."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    pytester.makefile(".toml", kforge=f'kernels_dir = "{root / "kernels"}"\n')
    result = pytester.runpytest("--kernel", "softmax:v0", "--kforge-no-bench", "--kforge-examples", "3", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_correctness[[]softmax-v0-wide-rows4-cols256[]] PASSED*"])
    mla = pytester.runpytest("--kernel", "mla:v0", "--trial", "decode", "--kforge-no-bench", "-k", "test_correctness",
                             "-v")
    mla.assert_outcomes(passed=1)
    mla.stdout.fnmatch_lines(["*test_correctness[[]mla-v0-decode-b4-s1-t256-h128[]] PASSED*"])
