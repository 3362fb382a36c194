"""ncu side by side (pytest_kforge.profile.side) on synthetic raw-page CSVs, and the driver's peer:NAME."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_kforge.profile.parse import parse_raw_csv
from pytest_kforge.profile.side import metric_rows, render, side_command

ROOT = Path(__file__).resolve().parents[1]
HEAD = ('"ID","Kernel Name","Grid Size","Block Size","gpu__time_duration.sum","launch__registers_per_thread",'
        '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",'
        '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",'
        '"smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio",'
        '"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"')
UNITS = '"","","","","ns","register/thread","","","","%"'


def _csv(*rows: str) -> str:
    return "\n".join(["==PROF== Disconnected", HEAD, UNITS, *rows]) + "\n"


def test_render_puts_each_kernel_in_a_column_and_ranks_stalls() -> None:
    ours = parse_raw_csv(_csv('"0","kernel_cutlass_kernel_mla(int)","(1024,1,1)","(384,1,1)","866560","168","0.5","2.5",'
                              '"0","12"'))
    peer = parse_raw_csv(_csv(
        '"0","void sm90::flash_fwd_splitkv_mla_kernel<Traits<bf16>, '
        '1>(Params)","(128,1,1)","(256,1,1)","823000","240","1.5","0.25","0","9"',
        '"1","void smxx::flash_fwd_mla_combine_kernel<bf16>(Params)","(8192,1,1)","(128,1,1)","7700","48","0","0","0","1"'))
    text = render({"v35_cute": ours, "peer:flashmla": peer}, kernel="mla", trial="spec")
    assert "| metric | v35_cute / kernel_cutlass_kernel_mla | peer:flashmla / flash_fwd_splitkv_mla_kernel | " \
           "peer:flashmla / flash_fwd_mla_combine_kernel |" in text
    assert "| duration | 866,560 ns | 823,000 ns | 7,700 ns |" in text
    assert "duration 830,700 ns in all" in text and "duration 866,560 ns in all" in text
    rows = [label for _, label in metric_rows(ours + peer)]
    # curated first, then stall reasons by their largest value (wait 2.5 > barrier 1.5), zero-only ones dropped
    assert rows == ["duration", "registers / thread", "stall (warps per issue): wait",
                    "stall (warps per issue): barrier", "pipe: xu"]


def test_cells_use_readable_units() -> None:
    from pytest_kforge.profile.side import _cell

    assert _cell(1742566877.0, "hz") == "1,743 MHz"
    assert _cell(277982720.0, "byte") == "278 MB" and _cell(7424.0, "byte") == "0.00742 MB"
    assert _cell(2.04, "inst") == "2.04" and _cell(866272.0, "ns") == "866,272 ns" and _cell(None, "ns") == "-"


def test_render_without_kernels_says_so() -> None:
    text = render({"v35_cute": []}, kernel="mla", trial="spec")
    assert "no kernel in the range" in text and "(no kernels were profiled)" in text


def test_side_command_profiles_the_driver_call_with_the_full_set() -> None:
    cmd = side_command("mla", "peer:flashmla", "spec", out="o/peer-flashmla.ncu-rep", ncu="ncu", python="py")
    assert cmd[:cmd.index("--export") + 2] == [
        "ncu", "--target-processes", "all", "--clock-control", "none", "--cache-control", "all", "--replay-mode",
        "kernel", "--nvtx", "--nvtx-include", "kforge/", "--set", "full", "--force-overwrite", "--export",
        "o/peer-flashmla"]
    assert cmd[cmd.index("--export") + 2:][:4] == ["py", "-m", "pytest_kforge.profile.driver", "--kernel"]
    assert "peer:flashmla" in cmd


def _driver(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_kforge.profile.driver", "--kernel", "mla", *args,
                           "--device", "cpu"], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_driver_runs_a_peer_and_names_an_unknown_one() -> None:
    ok = _driver("--version", "peer:torch_bmm", "--trial", "decode", "--params", "b=2,t=130,h=16", "--warmup", "1")
    assert ok.returncode == 0, ok.stderr
    assert "KFORGE-DRIVER: ok: mla peer:torch_bmm decode-b2-s1-t130-h16" in ok.stderr
    bad = _driver("--version", "peer:nosuch", "--trial", "decode")
    assert bad.returncode == 2 and "KFORGE-DRIVER: error: unknown peer 'nosuch'" in bad.stderr


def _fake_ncu(tmp_path: Path, body: str) -> Path:
    ncu = tmp_path / "ncu"
    ncu.write_text("#!/usr/bin/env bash\n" + body)
    ncu.chmod(0o755)
    return ncu


def test_side_main_says_which_candidate_failed_and_why(tmp_path, monkeypatch, capsys) -> None:
    from pytest_kforge.profile import side

    monkeypatch.setenv("KFORGE_NCU", str(_fake_ncu(tmp_path, 'echo "KFORGE-DRIVER: raised: RuntimeError: boom" >&2; exit 1\n')))
    rc = side.main(["--kernel", "mla", "--trial", "spec", "--candidates", "v35_cute", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and "side: v35_cute: the profiled run failed (ncu exit 1): KFORGE-DRIVER: raised: RuntimeError: boom" in err


def test_side_main_writes_the_table_from_the_exported_csv(tmp_path, monkeypatch, capsys) -> None:
    from pytest_kforge.profile import side

    csv_text = _csv('"0","kernel_cutlass_kernel_mla(int)","(1024,1,1)","(384,1,1)","866560","168","0.5","2.5","0","12"')
    (tmp_path / "raw.csv").write_text(csv_text)
    body = (f'if [ "$1" = --import ]; then cat {tmp_path / "raw.csv"}; exit 0; fi\n'
            'echo "KFORGE-DRIVER: ok: mla v35_cute spec" >&2\n')
    monkeypatch.setenv("KFORGE_NCU", str(_fake_ncu(tmp_path, body)))
    out = tmp_path / "o"
    rc = side.main(["--kernel", "mla", "--trial", "spec", "--candidates", "v35_cute", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert "| duration | 866,560 ns |" in (out / "side.md").read_text()
    from pytest_kforge.profile.parse import read_csv_text

    assert read_csv_text(out / "v35_cute.csv.gz") == csv_text  # the raw export is kept, gzipped
