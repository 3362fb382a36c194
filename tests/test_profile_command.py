"""The ncu command builder."""

from __future__ import annotations

import pytest

from pytest_kforge.profile.command import driver_command, export_csv_command, profile_command, query_metrics_command


def _opt(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_profile_command_defaults() -> None:
    app = driver_command("mla", "v1", "decode", python="python3")
    cmd = profile_command(app, out="reports/mla/v1/decode.ncu-rep", metrics=["gpu__time_duration.sum", "x__y.sum"])
    assert cmd[0] == "ncu"
    assert _opt(cmd, "--clock-control") == "none"
    assert _opt(cmd, "--nvtx-include") == "kforge/"  # push/pop ranges need the trailing slash
    assert "--nvtx" in cmd and _opt(cmd, "--launch-count") == "64"
    assert _opt(cmd, "--metrics") == "gpu__time_duration.sum,x__y.sum"
    assert _opt(cmd, "--export") == "reports/mla/v1/decode"  # ncu appends .ncu-rep itself
    assert _opt(cmd, "--target-processes") == "all"
    assert cmd[-len(app):] == app
    assert app == ["python3", "-m", "pytest_kforge.profile.driver", "--kernel", "mla", "--version", "v1",
                   "--trial", "decode", "--warmup", "3", "--seed", "0"]


def test_profile_command_options() -> None:
    cmd = profile_command(["app"], out="r", metrics=["m"], ncu="/opt/ncu", launch_count=5, nvtx_include=None,
                          extra=["--cache-control", "none"])
    assert cmd[0] == "/opt/ncu" and "--nvtx" not in cmd and _opt(cmd, "--launch-count") == "5"


@pytest.mark.parametrize("extra", [["--clock-control", "base"], ["--clock-control=base"], ["--set", "full"],
                                   ["--section", "SpeedOfLight"]])
def test_clocks_and_metric_set_cannot_be_overridden(extra) -> None:
    with pytest.raises(ValueError, match="set by kforge"):
        profile_command(["app"], out="r", metrics=["m"], extra=extra)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="at least one metric"):
        profile_command(["app"], out="r", metrics=[])
    with pytest.raises(ValueError, match="launch_count"):
        profile_command(["app"], out="r", metrics=["m"], launch_count=0)


def test_driver_params_and_timing() -> None:
    cmd = driver_command("mla", "v0", "decode", params={"b": 16, "s": 1}, time_n=30, kernels_dir="k")
    assert _opt(cmd, "--params") == "b=16,s=1" and _opt(cmd, "--time") == "30" and _opt(cmd, "--kernels-dir") == "k"


def test_export_and_query() -> None:
    assert export_csv_command("a.ncu-rep") == ["ncu", "--import", "a.ncu-rep", "--csv", "--page", "raw",
                                               "--print-units", "base"]
    assert query_metrics_command(chip="gh100", mode="suffix", metrics=["a", "b"]) == [
        "ncu", "--query-metrics", "--chips", "gh100", "--query-metrics-mode", "suffix", "--metrics", "a,b"]


def test_driver_runs_a_version_end_to_end_on_cpu() -> None:
    """The program ncu profiles, smoke-tested on CPU (no NVTX there) with a small MLA shape."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cmd = [*driver_command("mla", "v0", "decode", kernels_dir=root / "kernels", warmup=1, python=sys.executable,
                           params={"b": 2, "t": 130, "h": 16}), "--device", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=root)
    assert res.returncode == 0, res.stderr
    assert "KFORGE-DRIVER: ok: mla v0 decode-b2-s1-t130-h16" in res.stderr
    bad = subprocess.run([*driver_command("mla", "v0", "nosuch", python=sys.executable), "--device", "cpu"],
                         capture_output=True, text=True, timeout=120, cwd=root)
    assert bad.returncode == 2 and "KFORGE-DRIVER: error: kernel 'mla' has no trial 'nosuch'" in bad.stderr


def test_driver_says_when_the_dsl_toolchain_does_not_import(tmp_path) -> None:
    """A cuTile version where cuda.tile does not import: exit 6 and a ``toolchain:`` line (not
    ``raised:``), which the collector words as an environment problem, not a crash."""
    import importlib.util
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pytest_kforge.profile.collect import RunResult, classify_fault
    from test_plugin_helpers import write_tiny

    try:
        if importlib.util.find_spec("cuda.tile") is not None:
            pytest.skip("cuda.tile imports here")
    except ImportError:
        pass
    write_tiny(tmp_path, ("v0", "v7_tile"))
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    cmd = [*driver_command("tiny", "v7_tile", "small", kernels_dir=tmp_path / "kernels", python=sys.executable),
           "--device", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert res.returncode == 6, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("KFORGE-DRIVER: toolchain: ModuleNotFoundError: No module named 'cuda")
    fault = classify_fault(RunResult(cmd, 6, "", res.stderr, False, 1.0), what="tiny v7_tile on small", timeout_s=60)
    assert fault is not None and "its DSL toolchain is not importable in the process ncu ran (No module" in fault
