"""The kforge options: registration in the "kforge" group, validators, usage errors, the --version trap."""

from __future__ import annotations

import pytest

from test_plugin_helpers import write_tiny


def test_help_lists_options_in_kforge_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    out = result.stdout.str()
    assert "kforge: optimise a GPU kernel" in out
    for opt in ("--kernel=NAME[:VERSION]", "--kernel-version=V[,V|all]", "--trial=NAME[,NAME]",
                "--kforge-device=auto|cpu|cuda[:N]", "--kforge-rounds=N", "--kforge-warmup=N",
                "--kforge-seed=N", "--kforge-json=PATH", "--kforge-peak-tbs=TB/S", "--kforge-peak-tflops=TFLOP/S",
                "--kforge-no-bench", "--kforge-examples=N", "--kforge-clock-guard=PCT", "--kforge-clock-witness=MS"):
        assert opt in out, opt


@pytest.mark.parametrize(("args", "message"), [
    (["--kforge-rounds", "0"], "argument --kforge-rounds: expected an integer >= 1, got '0'"),
    (["--kforge-rounds", "many"], "argument --kforge-rounds: expected an integer >= 1, got 'many'"),
    (["--kforge-warmup", "-1"], "argument --kforge-warmup: expected an integer >= 0, got '-1'"),
    (["--kforge-clock-guard", "high"], "--kforge-clock-guard 'high' is not a number; give a percentage like 99"),
    (["--kforge-clock-guard", "120"], "--kforge-clock-guard '120' must be from 0 (off) to below 100"),
    (["--kforge-clock-witness", "soon"], "--kforge-clock-witness 'soon' must be a number of milliseconds from 0"),
    (["--kforge-peak-tbs", "-4"], "argument --kforge-peak-tbs: expected a positive number, got '-4'"),
    (["--kforge-device", "gpu"], "argument --kforge-device: expected 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    (["--kernel", "MLA!"], "argument --kernel: expected a kernel name like 'mla' or name:version like 'mla:v4', "
                           "got 'MLA!'"),
    (["--kernel-version", "4"], "argument --kernel-version: expected versions like 'v4', 'v4,v5' or 'all', got '4'"),
    (["--trial", "Decode"], "argument --trial: expected trial names like 'decode' or 'decode,spec', got 'Decode'"),
])
def test_validators_say_what_is_wrong(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_unknown_kernel_is_one_usage_line(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    result = pytester.runpytest("--kernel", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown kernel 'nope': * has tiny; pass one of those to --kernel*"])


def test_unknown_version_lists_the_existing_ones(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v0", "v5_wrong"))
    result = pytester.runpytest("--kernel", "tiny", "--kernel-version", "v9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: kernel 'tiny' has no version 'v9'; it has v0, v5_wrong (or 'all')*"])


def test_unknown_trial(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    result = pytester.runpytest("--kernel", "tiny:v0", "--trial", "huge")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: kernel 'tiny' has no trial 'huge'; it has small, big, odd*"])


def test_conflicting_versions(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    result = pytester.runpytest("--kernel", "tiny:v0", "--kernel-version", "v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "give the version once" in result.stderr.str()


def test_kernel_version_without_kernel(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--kernel-version", "v0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--kernel-version/--trial need --kernel NAME" in result.stderr.str()


def test_lone_version_runs_no_tests(pytester: pytest.Pytester) -> None:
    """The trap: pytest answers a lone --version itself, exit 0, before plugins load."""
    write_tiny(pytester.path)
    result = pytester.runpytest_inprocess("--kernel", "tiny", "--version", "v0")
    assert result.ret == 0
    assert "pytest" in (result.stdout.str() + result.stderr.str())
    assert "passed" not in result.stdout.str() and "kforge" not in result.stdout.str()
    # the forms that work do run the suite
    for args in (["--kernel", "tiny", "--kernel-version", "v0"], ["--kernel", "tiny:v0"]):
        ok = pytester.runpytest(*args, "--kforge-no-bench", "-k", "test_correctness")
        ok.assert_outcomes(passed=2)


def test_header_prints_seed_and_seed_reproduces(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v5_wrong",))
    result = pytester.runpytest("--kernel", "tiny:v0", "--kforge-no-bench", "--kforge-seed", "1234", "--co")
    result.stdout.fnmatch_lines(["kforge: kernel tiny, versions v0, trials small-n256, big-n4096, device cpu",
                                 "kforge: seed 1234 (reproduce with --kforge-seed 1234)*"])
    fresh = pytester.runpytest("--kernel", "tiny:v0", "--kforge-no-bench", "--co")
    seeds = [line for line in fresh.stdout.lines if line.startswith("kforge: seed ")]
    assert len(seeds) == 1 and "reproduce with --kforge-seed" in seeds[0] and "1234" not in seeds[0]

    def failure(seed: str) -> list[str]:
        run = pytester.runpytest("--kernel", "tiny:v5_wrong", "--trial", "small", "-k", "test_correctness",
                                 "--kforge-seed", seed)
        return [line for line in run.stdout.lines if "max abs error" in line]

    first = failure("99")
    assert first and first == failure("99") and first != failure("100")
