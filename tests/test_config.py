"""[tool.kforge] / kforge.toml parsing and its one-sentence errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kforge.config import load_config
from pytest_kforge.errors import ConfigError


def test_defaults_without_a_file(tmp_path: Path) -> None:
    cfg = load_config(tmp_path)
    assert cfg.kernels_dir == tmp_path / "kernels" and cfg.rounds == 100 and cfg.source is None
    assert (cfg.peak_bandwidth_tbs, cfg.peak_tflops) == (4.3, 790.0)


def test_pyproject_table_and_relative_kernels_dir(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kforge]\nkernels_dir = "src/k"\npeak_tflops = 800\nrounds = 50\ntrials = ["decode"]\n'
        '[tool.kforge.trial_matrix.mla]\nlong = {b = 2, s = 1, t = 65536, h = 128}\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = load_config(sub)
    assert cfg.kernels_dir == tmp_path / "src" / "k" and cfg.peak_tflops == 800.0 and cfg.rounds == 50
    assert cfg.trials == ("decode",) and cfg.trial_matrix["mla"]["long"]["t"] == 65536


def test_kforge_toml_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.kforge]\nrounds = 50\n")
    (tmp_path / "kforge.toml").write_text("[kforge]\nrounds = 7\n")
    assert load_config(tmp_path).rounds == 7


@pytest.mark.parametrize(("body", "message"), [
    ("[tool.kforge]\nround = 5\n", "unknown key 'round'; known keys are clock_guard_pct, clock_witness_ms, "
                                   "default_kernel, fuzz_examples, kernels_dir"),
    ("[tool.kforge]\nrounds = \"many\"\n", "rounds must be a int, got str 'many'"),
    ("[tool.kforge]\nrounds = 0\n", "rounds must be positive, got 0"),
    ("[tool.kforge]\nwarmup = -1\n", "warmup must be 0 or more, got -1"),
    ("[tool.kforge]\nclock_guard_pct = 100\n", "clock_guard_pct must be from 0 (off) to below 100, got 100.0"),
    ("[tool.kforge]\nclock_witness_ms = -5\n", "clock_witness_ms must be from 0 (off) to 1000 milliseconds, got -5.0"),
    ("[tool.kforge]\ntrials = []\n", "trials must be a non-empty list of trial names"),
    ("[tool.kforge.trial_matrix.mla]\nx = {b = 0}\n", "trial_matrix.mla.x must map lower-case parameter names to positive"),
    ("[tool.kforge\n", "is not valid TOML"),
])
def test_errors_are_one_sentence(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(body)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    text = str(info.value)
    assert message in text and "\n" not in text and str(tmp_path / "pyproject.toml") in text


def test_bad_config_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", kforge="peak_tflops = -1\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */kforge.toml: peak_tflops must be positive, got -1.0"])
