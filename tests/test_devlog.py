"""The devlog's current-best table from a results JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_kforge.best import compute, load_best
from pytest_kforge.devlog import main, render_best
from pytest_kforge.results import TrialResult


def _row(version: str, trial: str, us: float, pct: float, correct: bool = True, error: str | None = None) -> dict:
    return {"version": version, "language": "torch", "trial": trial, "id": trial, "median_us": us, "tflops": 1.0,
            "pct_floor": pct, "spread_pct": 1.0, "note": "", "correct": correct, "error": error}


def _rows(*rows: dict) -> list[TrialResult]:
    return [TrialResult.from_json(r) for r in rows]


def test_best_first_and_failures_left_out() -> None:
    record = compute("mla", _rows(_row("v0", "decode", 2000, 2), _row("v0", "spec", 17000, 4),
                                  _row("v3", "decode", 100, 45), _row("v3", "spec", 1200, 60),
                                  _row("v9", "decode", 10, 99, correct=False),
                                  _row("v8", "spec", 5, 99, error="below floor")), ["decode", "spec"],
                     gpu="NVIDIA H200", command="pytest --kernel mla")
    assert [r["version"] for r in record.rows] == ["v3", "v0"] and record.best == "v3"
    text = render_best(record)
    assert text.splitlines()[2].startswith("| v3 | torch | 100.0 | 1200.0 | 1300.0 |")
    assert "v9" not in text and "v8" not in text and "Best: **v3**" in text and record.rule in text


def test_one_trial_only_ranks_below_a_version_with_both() -> None:
    record = compute("mla", _rows(_row("v1", "decode", 50, 90), _row("v2", "decode", 60, 80),
                                  _row("v2", "spec", 900, 80)), ["decode", "spec"])
    assert [r["version"] for r in record.rows] == ["v2", "v1"] and record.best == "v2"
    assert record.per_trial == {"decode": {"version": "v1", "median_us": 50}, "spec": {"version": "v2",
                                                                                      "median_us": 900}}


def test_overall_is_the_lowest_sum_of_medians_not_the_mean_percent_of_floor() -> None:
    """Run 27's case: v57_cute has the higher mean % of floor, v59_cute the lower decode + spec time."""
    record = compute("mla", _rows(_row("v57", "decode", 74.2, 62.3), _row("v57", "spec", 850.8, 86.9),
                                  _row("v59", "decode", 75.4, 61.3), _row("v59", "spec", 846.6, 87.3)),
                     ["decode", "spec"])
    assert record.best == "v59" and record.per_trial["decode"]["version"] == "v57"


def test_render_rewrites_the_table_from_a_record_alone(tmp_path: Path) -> None:
    record = compute("mla", _rows(_row("v3", "decode", 100, 45), _row("v3", "spec", 1200, 60)), ["decode", "spec"])
    record.write(tmp_path / "best.json")
    log = tmp_path / "mla.md"
    log.write_text("<!-- kforge:best:start -->\nstale\n<!-- kforge:best:end -->\n")
    assert main(["render", "--best-json", str(tmp_path / "best.json"), "--devlog", str(log)]) == 0
    assert render_best(load_best(tmp_path / "best.json")) in log.read_text()


def test_cli_writes_the_block_and_keeps_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "mla.md"
    log.write_text("# devlog\n\nhuman text\n<!-- kforge:best:start -->\nold\n<!-- kforge:best:end -->\ntail\n")
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"gpu": "G", "started": "2026-12-02T00:00", "results": [_row("v3", "decode", 100, 45)]}))
    assert main(["best", "--from-json", str(js), "--devlog", str(log)]) == 0
    text = log.read_text()
    assert "human text" in text and "tail" in text and "old" not in text and "| v3 |" in text


def test_cli_unreadable_json_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["best", "--from-json", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot read" in err


def test_cli_merges_the_parts_of_a_split_run(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"gpu": "G", "started": "2026-12-03T17:07", "results": [_row("v3", "decode", 100, 45)]}))
    b.write_text(json.dumps({"gpu": "G", "started": "2026-12-03T17:25", "results": [_row("v9", "decode", 50, 90)]}))
    assert main(["best", "--from-json", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.index("| v9 |") < out.index("| v3 |") and "on 2026-12-03" in out and "G / G" not in out


def test_cli_refuses_a_version_in_two_parts(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for p, us in ((a, 100), (b, 90)):
        p.write_text(json.dumps({"gpu": "G", "results": [_row("v3", "decode", us, 45)]}))
    assert main(["best", "--from-json", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "v3 is in both" in err


def test_cli_reads_gzipped_parts_and_dates_the_run_by_its_first_part(tmp_path: Path, capsys) -> None:
    import gzip

    a, b = tmp_path / "a.json.gz", tmp_path / "b.JSON"
    a.write_bytes(gzip.compress(json.dumps({"gpu": "G", "started": "2026-12-04T01:00",
                                            "results": [_row("v3", "decode", 100, 45)]}).encode()))
    b.write_text(json.dumps({"gpu": "G", "started": "2026-12-03T23:00", "results": [_row("v9", "decode", 50, 90)]}))
    assert main(["best", "--from-json", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "| v3 |" in out and "| v9 |" in out and "on 2026-12-03 " in out


@pytest.mark.parametrize("content", [b"\x1f\x8b\x08\x00garbage-not-deflate", b"[1, 2]", b"\x1f\x8b"])
def test_cli_broken_parts_are_one_line(tmp_path: Path, capsys, content: bytes) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(content)
    assert main(["best", "--from-json", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot read" in err


def test_cli_rerun_replaces_the_redone_versions_rows_and_says_so(tmp_path: Path, capsys) -> None:
    """Run 24: v1_cute-v3_cute failed on a host error in part 2 and ran again after the fix; the re-run's rows
    replace theirs (a failed row there must not come back), the other versions keep their parts' rows."""
    part, rerun = tmp_path / "part.json", tmp_path / "rerun.json"
    part.write_text(json.dumps({"gpu": "G", "started": "2026-12-04T16:51", "results": [
        _row("v2", "decode", 150, 30, correct=False, error="AttributeError"), _row("v3", "spec", 2092, 35),
        _row("v4", "decode", 115, 40)]}))
    rerun.write_text(json.dumps({"gpu": "G", "started": "2026-12-04T17:17", "results": [
        _row("v2", "decode", 152, 30), _row("v3", "decode", 153, 30)]}))
    assert main(["best", "--from-json", str(part), "--rerun", str(rerun)]) == 0
    cap = capsys.readouterr()
    assert "v2, v3 from the re-run" in cap.err
    lines = {ln.split(" | ")[0].strip("| "): ln for ln in cap.out.splitlines() if ln.startswith("| v")}
    assert set(lines) == {"v2", "v3", "v4"} and "| 152.0 |" in lines["v2"]
    assert "2092" not in lines["v3"] and "| 153.0 | - |" in lines["v3"]  # the part's v3 spec row is left out too
    assert "Note: v2, v3 from a re-run (rerun.json, started 2026-12-04T17:17), in place of" in cap.out
    assert "warning" not in cap.err
    stray = tmp_path / "stray.json"
    stray.write_text(json.dumps({"results": [_row("v7", "decode", 1, 1)]}))
    assert main(["best", "--from-json", str(part), "--rerun", str(stray)]) == 0
    assert "warning: v7 of the re-run" in capsys.readouterr().err
    assert main(["best", "--from-json", str(part), "--rerun", str(rerun), str(rerun)]) == 0  # same file twice: once
    two = tmp_path / "rerun2.json"
    two.write_text(rerun.read_text())
    assert main(["best", "--from-json", str(part), "--rerun", str(rerun), str(two)]) == 2
    assert "give each version's re-run once" in capsys.readouterr().err


def test_best_states_the_runs_own_ceilings(tmp_path: Path) -> None:
    """A calibrated run's floors are its GPU's; a record without them (before calibration) says the H200 default."""
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "started": "2026-12-06T00:00",
                              "roofline": {"tbs": 3.06, "tflops": 784.0}, "results": [_row("v3", "decode", 100, 45)]}))
    assert main(["best", "--from-json", str(js), "--best-json", str(tmp_path / "best.json")]) == 0
    record = load_best(tmp_path / "best.json")
    assert record.roofline == {"tbs": 3.06, "tflops": 784.0}
    assert "floors at 3.06 TB/s and 784 TFLOP/s" in render_best(record)
    assert "floors at 4.3 TB/s and 790 TFLOP/s" in render_best(compute("mla", _rows(_row("v3", "decode", 1, 1)),
                                                                       ["decode"]))
