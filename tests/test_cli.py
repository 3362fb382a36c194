"""The kforge console script: rewriting the product's `--version v4` form for pytest."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_kforge.cli import CliError, main, rewrite_args

from test_plugin_helpers import write_tiny


@pytest.mark.parametrize(("argv", "want"), [
    (["--kernel", "mla", "--version", "v4"], ["--kernel", "mla", "--kernel-version", "v4"]),
    (["--kernel", "mla", "--version=v4,v5", "-x"], ["--kernel", "mla", "--kernel-version", "v4,v5", "-x"]),
    (["--version", "all", "-k", "decode"], ["--kernel", "mla", "--kernel-version", "all", "-k", "decode"]),
    (["--kernel", "mla:v2", "-q"], ["--kernel", "mla:v2", "-q"]),
    (["--kernel", "mla", "--", "--version", "v4"], ["--kernel", "mla", "--", "--version", "v4"]),
])
def test_rewrite(argv: list[str], want: list[str]) -> None:
    assert rewrite_args(argv, default_kernel="mla") == want


@pytest.mark.parametrize(("argv", "message"), [
    (["--kernel", "mla", "--version"], "--version needs a kernel version like v4"),
    (["--kernel", "mla", "--version", "-x"], "--version needs a kernel version like v4"),
    (["--kernel", "mla", "--version", "4"], "--version expects versions like v4, v4,v5 or all, got '4'"),
    (["--version", "v1"], "--version needs --kernel NAME"),
])
def test_rewrite_errors(argv: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        rewrite_args(argv, default_kernel=None)


def test_lone_version_prints_kforge_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("pytest-kforge ")


def test_bad_cli_returns_usage_code(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                    tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--kernel", "mla", "--version", "nope"]) == 4
    assert "kforge: error: --version expects versions" in capsys.readouterr().err


def test_script_runs_the_suite_where_plain_pytest_runs_nothing(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    # -k correctness: the subprocess then never imports hypothesis (slow without a bytecode cache)
    args = ["--kernel", "tiny", "--version", "v0", "--kforge-no-bench", "-k", "test_correctness", "-p",
            "no:cacheprovider"]
    ran = subprocess.run([sys.executable, "-m", "pytest_kforge.cli", *args], cwd=pytester.path,
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "2 passed" in ran.stdout and "kforge tiny v0 on cpu" in ran.stdout
    plain = pytester.runpytest_inprocess(*args)
    assert plain.ret == 0 and "passed" not in plain.stdout.str()
