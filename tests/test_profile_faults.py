"""Faults are one line each and never fatal: a fake ncu in a temporary PATH plays each one."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from pytest_kforge.profile.collect import RunResult, classify_fault, collect, toolchain_import_error
from pytest_kforge.profile.parse import NcuParseError, parse_raw_csv
from pytest_kforge.profile.report import load_report_json
from pytest_kforge.profile.run import profile_version

DATA = Path(__file__).parent / "data" / "ncu"
KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only an `ncu` that is tests/data/ncu/fake_ncu.py (and python for it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    shutil.copy(DATA / "fake_ncu.py", ncu)
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("KFORGE_NCU", raising=False)
    monkeypatch.setenv("FAKE_NCU_CSV", str(DATA / "synthetic-mla-v1-decode.csv"))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "argv.log"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    return bin_dir


def _one_line(text: str | None) -> str:
    assert text is not None and "\n" not in text
    return text


@pytest.mark.parametrize("mode, needle", [
    ("perm", "no permission to read the GPU performance counters"),
    ("nokernel", "no kernel of mla v1 on decode matched the filter"),
    ("crash", "crashed under ncu replay (==ERROR== LaunchFailed"),
    ("raised", "failed under ncu replay (RuntimeError: CUDA error"),
    ("badmetric", "ncu rejected a metric while profiling mla v1 on decode (==ERROR== Failed to find metric"),
    ("badcsv", "ncu could not export"),
])
def test_fault_lines(fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, needle: str) -> None:
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    got = collect("mla", "v1", "decode", out_dir=tmp_path / "out", metrics=["gpu__time_duration.sum"])
    assert needle in _one_line(got.fault)
    assert (got.rep_path is None) == (mode != "badcsv")  # the report exists when only the export failed


def test_timeout(fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_MODE", "timeout")
    got = collect("mla", "v1", "decode", out_dir=tmp_path / "out", metrics=["m"], timeout_s=1.5)
    assert "ncu timed out after 2 s" in _one_line(got.fault) and "--kforge-ncu-timeout" in got.fault
    assert got.wall_s < 30


def test_ncu_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KFORGE_NCU", raising=False)
    got = collect("mla", "v1", "decode", out_dir=tmp_path / "out", metrics=["m"])
    assert "ncu not found" in _one_line(got.fault) and "--kforge-ncu" in got.fault
    got = collect("mla", "v1", "decode", out_dir=tmp_path / "out", metrics=["m"], ncu=str(tmp_path / "nope" / "ncu"))
    assert "ncu not found" in _one_line(got.fault)


def test_ok_run_writes_rep_and_csv(fake_path: Path, tmp_path: Path) -> None:
    got = collect("mla", "v1", "decode", out_dir=tmp_path / "out", metrics=["gpu__time_duration.sum"])
    assert got.ok and got.rep_path.name == "decode.ncu-rep" and got.csv_path.name == "decode.csv.gz"
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    profile = next(a for a in argv if "--export" in a)
    assert profile[profile.index("--clock-control") + 1] == "none"
    assert any(a[:2] == ["--import", str(got.rep_path)] for a in argv)
    # the raw CSV is kept gzipped, byte-identical for the same text, and reads back as the export's text
    from pytest_kforge.profile.parse import load_records, parse_raw_csv, read_csv_text

    assert got.csv_path.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic
    text = read_csv_text(got.csv_path)
    assert text.strip() and load_records(csv_path=got.csv_path) == parse_raw_csv(text)


def test_cli_from_recorded_gzipped_csv(tmp_path: Path) -> None:
    """A report folder keeps ``<trial>.csv.gz`` (how collect writes it): --from-csv reads it and names it."""
    from pytest_kforge.profile.__main__ import main
    from pytest_kforge.profile.parse import write_csv_gz

    rec = tmp_path / "rec" / "v1"
    rec.mkdir(parents=True)
    write_csv_gz(rec / "decode.csv.gz", (DATA / "synthetic-mla-v1-decode.csv").read_text())
    root = tmp_path / "proj"
    (root / "docs" / "kernels").mkdir(parents=True)
    (root / "kernels").symlink_to(KERNELS)
    assert main(["--root", str(root), "--version", "v1", "--trial", "decode", "--from-csv", str(rec.parent)]) == 0
    assert not (root / "reports" / "mla" / "v1" / "decode.json").exists()  # the twin is stored gzipped
    data = load_report_json(root / "reports" / "mla" / "v1" / "decode.json.gz")
    assert data["source"]["csv"] == "decode.csv.gz" and data["metrics"]["duration_us"] > 0


def test_profile_version_end_to_end_and_faults_do_not_stop_others(fake_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "docs" / "kernels").mkdir(parents=True)
    (root / "docs" / "kernels" / "mla.md").write_text("# mla\n\nhuman text\n")
    out = profile_version("mla", "v1", ["decode", "nosuchtrial"], root=root, kernels_dir=KERNELS)
    ok, bad = out
    assert ok.fault is None and ok.md_path == root / "reports" / "mla" / "v1" / "decode.md"
    assert (root / "reports" / "mla" / "v1" / "decode.ncu-rep").exists()
    assert "no trial 'nosuchtrial'" in _one_line(bad.fault) and "FAULT" in bad.line()
    devlog = (root / "docs" / "kernels" / "mla.md").read_text()
    assert "human text" in devlog and "<!-- kforge:perf:start -->" in devlog and "| v1 | decode |" in devlog
    data = load_report_json(ok.json_path)
    assert data["source"]["ncu_rep"] == "decode.ncu-rep" and data["verdict"]["kind"] == "Memory"
    assert any("no baseline" in n for n in data["notes"])  # v1's parent has no saved profile yet


def test_parse_errors_are_one_sentence() -> None:
    with pytest.raises(NcuParseError, match="empty"):
        parse_raw_csv("==PROF== nothing\n")
    with pytest.raises(NcuParseError, match="no kernel-name column"):
        parse_raw_csv('"a","b"\n"1","2"\n')


def test_parse_skips_ncu_chatter() -> None:
    text = "==WARNING== something\n" + (DATA / "synthetic-mla-v1-decode.csv").read_text()
    recs = parse_raw_csv(text)
    assert [r.name for r in recs] == ["mla_splitkv_fwd_kernel", "mla_combine_kernel"]
    assert recs[0].metrics["shared_mem_per_block_kb"] == 192.0 and recs[0].grid == "(264, 1, 1)"


def test_cli_from_recorded_csv_keeps_the_report_and_bench_time(tmp_path: Path) -> None:
    from pytest_kforge.profile.__main__ import main

    rec = tmp_path / "rec"
    rec.mkdir()
    shutil.copy(DATA / "synthetic-mla-v1-decode.csv", rec / "decode.csv")
    (rec / "decode.ncu-rep").write_text("recorded report")
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"results": [{"version": "v1", "trial": "decode", "median_us": 100.0}]}))
    root = tmp_path / "proj"
    (root / "docs" / "kernels").mkdir(parents=True)
    (root / "kernels").symlink_to(KERNELS)
    rc = main(["--root", str(root), "--version", "v1", "--trial", "decode", "--from-csv", str(rec),
               "--bench-json", str(bench)])
    assert rc == 0
    out = root / "reports" / "mla" / "v1"
    assert (out / "decode.ncu-rep").read_text() == "recorded report"
    data = load_report_json(out / "decode.json.gz")
    assert data["bench_median_us"] == 100.0
    assert data["ncu_vs_bench_pct"] == pytest.approx((data["metrics"]["duration_us"] - 100.0), abs=0.01)


def test_cli_list_and_check_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_kforge.profile.__main__ import main

    assert main(["--list-metrics"]) == 0
    assert "sm__pipe_tensor_op_hmma_cycles_active" in capsys.readouterr().out
    listing = tmp_path / "q.txt"
    listing.write_text("\n".join(f"sm__filler_{i}   x" for i in range(60)) + "\ngpu__time_duration   x\n")
    assert main(["--check-metrics", "--listing", str(listing)]) == 1  # most counters missing there
    out = capsys.readouterr().out
    assert "OK        duration_us" in out and "MISSING   dram_pct" in out


def test_a_failed_run_removes_the_stale_profile(fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    (root / "docs" / "kernels").mkdir(parents=True)
    [first] = profile_version("mla", "v1", ["decode"], root=root, kernels_dir=KERNELS)
    assert first.json_path.exists()
    monkeypatch.setenv("FAKE_NCU_MODE", "crash")
    [second] = profile_version("mla", "v1", ["decode"], root=root, kernels_dir=KERNELS)
    assert second.fault and not first.json_path.exists() and not first.md_path.exists()


@pytest.mark.parametrize("mode, missing", [
    ("toolchain", "No module named 'cutlass'"),      # the driver's own check (exit 6)
    ("importraised", "No module named 'cuda.tile'"),  # the import failed inside the version's run
])
def test_toolchain_not_importable_is_one_sentence_not_a_crash(fake_path: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, mode: str,
                                                               missing: str) -> None:
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    fault = _one_line(collect("mla", "v5_cute", "decode", out_dir=tmp_path / "out", metrics=["m"]).fault)
    assert fault.startswith("mla v5_cute on decode was not profiled: its DSL toolchain is not importable in "
                            f"the process ncu ran ({missing}); install it with `pip install -e \".[gpu]\"`")
    assert "env.sh" in fault and "pytest_kforge.doctor" in fault
    assert "compute-sanitizer" not in fault and "crashed" not in fault and "replay" not in fault


def _res(stderr: str, rc: int | None) -> RunResult:
    return RunResult(["ncu"], rc, "", stderr, False, 1.0)


@pytest.mark.parametrize("stderr, rc, needle", [
    # the version module itself failed to import (registry: BadVersionModuleError)
    ("KFORGE-DRIVER: error: kernels/mla/versions/v9.py failed to import: ModuleNotFoundError: No module named 'cuda.tile'",
     2, "its DSL toolchain is not importable in the process ncu ran (No module named 'cuda.tile')"),
    ("KFORGE-DRIVER: raised: ImportError: cannot import name 'pipeline' from 'cutlass' (/x/cutlass/__init__.py)",
     5, "(cannot import name 'pipeline' from 'cutlass')"),
    # not a toolchain module: still the crash advice
    ("KFORGE-DRIVER: raised: ModuleNotFoundError: No module named 'flashinfer'", 5,
     "failed under ncu replay (ModuleNotFoundError: No module named 'flashinfer')"),
])
def test_classify_toolchain_import_errors(stderr: str, rc: int, needle: str) -> None:
    assert needle in _one_line(classify_fault(_res(stderr, rc), what="mla v9 on decode", timeout_s=60))


def test_an_import_error_in_a_run_that_worked_is_no_fault() -> None:
    text = ("optional peer skipped (ModuleNotFoundError: No module named 'cutlass')\nKFORGE-DRIVER: loaded: a\n"
            "KFORGE-DRIVER: ok: fine")
    assert classify_fault(_res(text, 0), what="mla v1 on decode", timeout_s=60) is None
    assert toolchain_import_error("ModuleNotFoundError: No module named 'cutlass._mlir'") == \
        "No module named 'cutlass._mlir'"
    assert toolchain_import_error("ModuleNotFoundError: No module named 'numpy'") is None
