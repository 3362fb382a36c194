"""Per-GPU roofline ceilings (pytest_kforge.calibrate): precedence, the cache, the header line, the shipped file, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_kforge import calibrate
from pytest_kforge.calibrate import CalibrationError, load_entries, roofline_for, save_entry
from pytest_kforge.config import load_config
from test_plugin_helpers import write_tiny

ROOT = Path(__file__).resolve().parents[1]
H100 = "NVIDIA H100 80GB HBM3"
ENTRY = {"bandwidth_bytes_per_s": 3.2e12, "flops_per_s": 750e12, "source": "python -m pytest_kforge.calibrate",
         "measured": True, "date": "2026-12-06"}


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def known(tmp_path: Path) -> Path:
    path = tmp_path / "known.json"
    path.write_text(json.dumps({"_about": "notes are skipped", H100: {
        "bandwidth_bytes_per_s": 3.35e12, "flops_per_s": 989e12, "source": "datasheet, not measured (H100 SXM5)",
        "measured": False}, "NVIDIA H200": {"bandwidth_bytes_per_s": 4.3e12, "flops_per_s": 790e12,
                                            "source": "docs/kernels/mla.md (measured 2026-12)", "measured": True,
                                            "date": "2026-12"}}))
    return path


def test_cache_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path))
    assert calibrate.cache_path() == tmp_path / "calibration.json"
    monkeypatch.delenv("KFORGE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert calibrate.cache_path() == tmp_path / "home" / ".cache" / "pytest-kforge" / "calibration.json"


def test_cache_write_keeps_other_devices(cache_dir: Path) -> None:
    path = calibrate.cache_path()
    assert load_entries(path) == {}
    save_entry(path, H100, ENTRY)
    save_entry(path, "NVIDIA L40S", {**ENTRY, "bandwidth_bytes_per_s": 0.8e12})
    save_entry(path, H100, {**ENTRY, "flops_per_s": 760e12})
    got = load_entries(path)
    assert set(got) == {H100, "NVIDIA L40S"} and got[H100]["flops_per_s"] == 760e12
    assert json.loads(path.read_text())["NVIDIA L40S"]["bandwidth_bytes_per_s"] == 0.8e12


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "is not a readable calibration JSON"),
    ("[1, 2]", "must hold a JSON object keyed by device name"),
    ('{"NVIDIA H100 80GB HBM3": {"flops_per_s": 1e15}}', "needs positive bandwidth_bytes_per_s and flops_per_s"),
])
def test_bad_cache_is_one_sentence(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(text)
    with pytest.raises(CalibrationError) as info:
        load_entries(path)
    assert message in str(info.value) and "\n" not in str(info.value) and "calibrate" in str(info.value)


def test_precedence_cli_config_cache_known_default(tmp_path: Path, cache_dir: Path, known: Path) -> None:
    plain = load_config(tmp_path)  # no file: the 4.3 / 790 defaults are not "set by the user"
    assert plain.peak_bandwidth_tbs == 4.3 and not plain.explicit_keys
    # nothing cached, nothing known: the H200 default
    roof, line = roofline_for("NVIDIA L40S", plain, known=known)
    assert (roof.bandwidth_bytes_per_s, roof.flops_per_s) == (4.3e12, 790e12)
    # the shipped file
    roof, _ = roofline_for(H100, plain, known=known)
    assert (roof.bandwidth_bytes_per_s, roof.flops_per_s) == (3.35e12, 989e12)
    # the user cache wins over the shipped file
    save_entry(calibrate.cache_path(), H100, ENTRY)
    roof, _ = roofline_for(H100, plain, known=known)
    assert (roof.bandwidth_bytes_per_s, roof.flops_per_s) == (3.2e12, 750e12)
    # a peak set in [tool.kforge] wins over the cache, each figure on its own
    (tmp_path / "pyproject.toml").write_text("[tool.kforge]\npeak_tflops = 700\n")
    cfg = load_config(tmp_path)
    assert cfg.explicit_keys == {"peak_tflops"} and cfg.peak_tflops == 700.0
    roof, line = roofline_for(H100, cfg, known=known)
    assert (roof.bandwidth_bytes_per_s, roof.flops_per_s) == (3.2e12, 700e12)
    assert line == (f"roofline 3.2 TB/s, 700 TFLOP/s (TB/s: calibrated 2026-12-06, {calibrate.cache_path()}; "
                    f"TFLOP/s: peak_tflops from [tool.kforge] of {tmp_path / 'pyproject.toml'})")
    # the flags win over everything
    roof, line = roofline_for(H100, cfg, (2.0, 500.0), known=known)
    assert (roof.bandwidth_bytes_per_s, roof.flops_per_s) == (2.0e12, 500e12)
    assert line == "roofline 2 TB/s, 500 TFLOP/s (TB/s: --kforge-peak-tbs; TFLOP/s: --kforge-peak-tflops)"


def test_cpu_runs_look_nothing_up(tmp_path: Path, cache_dir: Path, known: Path) -> None:
    save_entry(calibrate.cache_path(), H100, ENTRY)
    roof, line = roofline_for(None, load_config(tmp_path), known=known)
    assert (roof.bandwidth_bytes_per_s, roof.flops_per_s) == (4.3e12, 790e12)
    assert line == "roofline 4.3 TB/s, 790 TFLOP/s (H200 default; cpu run)"
    roof, line = roofline_for(None, None, (1e-9, None))
    assert roof.bandwidth_bytes_per_s == pytest.approx(1e3) and roof.flops_per_s == 790e12
    assert line.startswith("roofline 1e-09 TB/s, 790 TFLOP/s (TB/s: --kforge-peak-tbs; TFLOP/s: H200 default")


def test_header_line_for_each_source(tmp_path: Path, cache_dir: Path, known: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(tmp_path)
    hint = "run python -m pytest_kforge.calibrate"
    assert roofline_for("NVIDIA L40S", cfg, known=known)[1] == (
        f"roofline 4.3 TB/s, 790 TFLOP/s (no calibration for 'NVIDIA L40S': H200 default; {hint})")
    assert roofline_for(H100, cfg, known=known)[1] == (
        f"roofline 3.35 TB/s, 989 TFLOP/s (datasheet, not measured: shipped known.json; {hint})")
    assert roofline_for("NVIDIA H200", cfg, known=known)[1] == (
        "roofline 4.3 TB/s, 790 TFLOP/s (shipped known.json: docs/kernels/mla.md (measured 2026-12))")
    assert roofline_for("NVIDIA H200", cfg, known=tmp_path / "none.json")[1] == "roofline 4.3 TB/s, 790 TFLOP/s (H200 default)"
    save_entry(calibrate.cache_path(), H100, {**ENTRY, "quick": True})
    assert roofline_for(H100, cfg, known=known)[1] == (
        f"roofline 3.2 TB/s, 750 TFLOP/s (calibrated 2026-12-06 --quick, {calibrate.cache_path()})")
    monkeypatch.setenv("HOME", str(tmp_path))  # the cache under the home folder is written ~/...
    assert roofline_for(H100, cfg, known=known)[1].endswith("(calibrated 2026-12-06 --quick, ~/cache/calibration.json)")
    (tmp_path / "kforge.toml").write_text("peak_bandwidth_tbs = 3\npeak_tflops = 600\n")
    assert roofline_for(H100, load_config(tmp_path), known=known)[1] == (
        f"roofline 3 TB/s, 600 TFLOP/s (TB/s: peak_bandwidth_tbs from {tmp_path / 'kforge.toml'}; "
        f"TFLOP/s: peak_tflops from {tmp_path / 'kforge.toml'})")


def test_shipped_known_file_schema() -> None:
    raw = json.loads(calibrate.KNOWN_FILE.read_text())
    entries = load_entries(calibrate.KNOWN_FILE)
    assert set(entries) >= {"NVIDIA H200", H100, "NVIDIA H100 PCIe"} and "_about" in raw
    h200 = entries["NVIDIA H200"]
    assert (h200["bandwidth_bytes_per_s"], h200["flops_per_s"]) == (4.3e12, 790e12)
    assert h200["source"] == "docs/kernels/mla.md (measured 2026-12)" and h200["measured"] is True
    for name, e in entries.items():
        assert isinstance(e["measured"], bool) and e["source"], name
        if not e["measured"]:
            assert e["source"].startswith("datasheet, not measured"), name
        for key in ("read_bandwidth_bytes_per_s", "copy_bandwidth_bytes_per_s", "bf16_flops_per_s", "fp8_flops_per_s"):
            assert e.get(key) is None or e[key] > 0, (name, key)
    # the Roofline default stays the H200's figures
    assert calibrate.Roofline() == calibrate.Roofline(4.3e12, 790e12)


def test_record_known_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "known.json"
    target.write_text(calibrate.KNOWN_FILE.read_text())
    monkeypatch.setattr(calibrate, "KNOWN_FILE", target)
    measured = tmp_path / "out.json"
    measured.write_text(json.dumps({H100: ENTRY}))
    assert calibrate.main(["--record-known", "--from", str(measured)]) == 0
    entries = load_entries(target)
    assert entries[H100]["flops_per_s"] == 750e12 and entries["NVIDIA H200"]["flops_per_s"] == 790e12
    assert "_about" in json.loads(target.read_text())
    assert H100 in capsys.readouterr().out


def test_cli_show_on_cpu_and_measuring_needs_a_gpu(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_entry(calibrate.cache_path(), H100, ENTRY)
    assert calibrate.main(["--show"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "datasheet, not measured" in out and "3.2 TB/s" in out
    if calibrate.device_name() is not None:
        pytest.skip("a CUDA GPU is here: measuring works (see test_quick_calibration_on_the_gpu)")
    assert calibrate.main(["--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ERROR: measuring the roofline ceilings") and "needs a CUDA GPU" in err and "\n" not in err


def test_option_parsing_does_not_import_torch(tmp_path: Path) -> None:
    code = ("import sys; from pytest_kforge import calibrate; rc = calibrate.main(['--show']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={"KFORGE_CACHE_DIR": str(tmp_path), "PATH": "", "HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr


@pytest.mark.usefixtures("standalone_env")
def test_plugin_header_and_floor_use_the_cache(pytester: pytest.Pytester, cache_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    write_tiny(pytester.path)
    args = ("--kernel", "tiny:v0", "--kforge-device", "cpu", "--kforge-rounds", "3", "--kforge-warmup", "1",
            "--kforge-examples", "2", "--kforge-no-bench")
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(["kforge: seed *; roofline 4.3 TB/s, 790 TFLOP/s (H200 default; cpu run)"])
    # as if the run's device were this GPU: the cached figures, and the line says where they came from
    save_entry(calibrate.cache_path(), H100, ENTRY)
    monkeypatch.setattr(calibrate, "device_name", lambda device="cuda": H100)
    result = pytester.runpytest(*args, "--kforge-json", str(pytester.path / "r.json"))
    result.stdout.fnmatch_lines([f"kforge: seed *; roofline 3.2 TB/s, 750 TFLOP/s (calibrated 2026-12-06, {cache_dir}*"])
    assert json.loads((pytester.path / "r.json").read_text())["roofline"] == {"tbs": 3.2, "tflops": 750.0}
    (cache_dir / "calibration.json").write_text("{oops")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *calibration.json is not a readable calibration JSON*"])
    # both flags given: the cache is not read at all
    result = pytester.runpytest(*args, "--kforge-peak-tbs", "2", "--kforge-peak-tflops", "500")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["kforge: seed *; roofline 2 TB/s, 500 TFLOP/s (TB/s: --kforge-peak-tbs; "
                                 "TFLOP/s: --kforge-peak-tflops)"])


@pytest.mark.gpu
def test_quick_calibration_on_the_gpu(tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (measures its bandwidth and matmul throughput)")
    out = tmp_path / "out" / "calibration.json"
    assert calibrate.main(["--quick", "--out", str(out)]) == 0
    name = torch.cuda.get_device_name()
    entry = load_entries(out)[name]
    assert load_entries(calibrate.cache_path())[name] == entry and entry["quick"] is True
    shipped = load_entries(calibrate.KNOWN_FILE).get(name, {})
    for key, ref in (("read_bandwidth_bytes_per_s", "bandwidth_bytes_per_s"), ("copy_bandwidth_bytes_per_s",
                     "bandwidth_bytes_per_s"), ("bf16_flops_per_s", "flops_per_s"), ("fp8_flops_per_s", "fp8_flops_per_s")):
        value = entry[key]
        if value is None:
            assert key == "fp8_flops_per_s" and entry["fp8_note"]
            continue
        assert value > 0, key
        if shipped.get(ref):
            assert value < 2 * shipped[ref], (key, value, shipped[ref])
    assert entry["sm_count"] > 0 and entry["torch"] and entry["method"]["rounds_bandwidth"] > 0
    assert name in capsys.readouterr().out
