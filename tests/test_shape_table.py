"""``benchmarks.shape_table``: the side-by-side run with one row per shape (CPU, synthetic rows)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.compare import Cell, Row, main
from benchmarks.shape_table import margin, render_by_trial

META = {"trials": {"serve_tp8": {"id": "serve_tp8-b64-s1-t4096-h16", "params": {"b": 64, "s": 1, "t": 4096, "h": 16},
                                 "floor_us": 69.4, "flops": 1e9, "min_bytes": 1e8},
                   "serve_b1": {"id": "serve_b1-b1-s1-t8191-h128", "params": {"b": 1, "s": 1, "t": 8191, "h": 128},
                                "floor_us": 2.9, "flops": 1e8, "min_bytes": 1e7},
                   "serve_ragged": {"id": "serve_ragged", "params": {"b": 32, "s": 1, "t": 4096, "h": 128,
                                                                     "ragged": 1},
                                    "floor_us": 44.7, "flops": 1e9, "min_bytes": 1e8}},
        "gpu": "NVIDIA H200", "measured": "2026-12-06T00:00:00+00:00", "timer": "cuda events", "rounds": 30,
        "warmup": 5, "seed": 0, "notes": {"flashmla:out": "copied into the harness's buffers"}}


def _cell(trial: str, us: float | None, correct: bool | None = True, message: str = "", host: float | None = None) -> Cell:
    return Cell(trial, trial, median_us=us, correct=correct, message=message, host_us=host, floor_us=1.0)


def _rows() -> list[Row]:
    v = Row("v59_cute", "version", "cute-dsl", cells={
        "serve_tp8": _cell("serve_tp8", 90.0, host=8.5), "serve_b1": _cell("serve_b1", 12.0, host=8.1),
        "serve_ragged": _cell("serve_ragged", 70.0, host=8.3)})
    fa3 = Row("flashinfer_fa3", "peer", "flashinfer", cells={
        "serve_tp8": _cell("serve_tp8", 100.0), "serve_b1": _cell("serve_b1", 10.0),
        "serve_ragged": _cell("serve_ragged", None, correct=False, message="max abs 3.1")})
    mla = Row("flashmla", "peer", "flashmla", cells={
        "serve_tp8": _cell("serve_tp8", None, correct=None, message="unsupported: h=16"),
        "serve_b1": _cell("serve_b1", 11.0, message="spread 9%"), "serve_ragged": _cell("serve_ragged", 75.0)})
    gone = Row("torch_bmm", "peer", "torch", skipped="not asked on the GPU")
    return [v, fa3, mla, gone]


def _line(text: str, trial: str) -> list[str]:
    row = next(ln for ln in text.splitlines() if ln.startswith(f"| {trial} |"))
    return [c.strip() for c in row.strip().strip("|").split("|")]


def test_margin_is_negative_when_the_version_is_ahead() -> None:
    assert margin(90.0, 100.0) == pytest.approx(-10.0) and margin(12.0, 10.0) == pytest.approx(20.0)


def test_one_row_per_shape_with_the_fastest_and_the_margin_against_the_fastest_correct_peer() -> None:
    text = render_by_trial(_rows(), META, "python -m benchmarks.compare ... --by-trial")
    head = _line(text, "trial")
    assert head == ["trial", "shape", "floor us", "v59_cute us", "flashinfer_fa3 us", "flashmla us", "fastest",
                    "v59_cute vs fastest peer", "v59_cute host us"]
    assert _line(text, "serve_tp8") == ["serve_tp8", "b=64 s=1 h=16 t=4096", "69.4", "90.0", "100.0", "unsupported",
                                        "v59_cute", "-10.0% (flashinfer_fa3)", "8.5"]
    # FlashInfer is fastest at b=1; FlashMLA's suspect timing is shown but still compared
    assert _line(text, "serve_b1")[3:8] == ["12.0", "10.0", "11.0 (suspect)", "flashinfer_fa3", "+20.0% (flashinfer_fa3)"]
    # a wrong peer is never the one the version is measured against
    ragged = _line(text, "serve_ragged")
    assert ragged[1] == "b=32 s=1 h=128 t=4096 ragged=1" and ragged[4] == "wrong" and ragged[7] == "-6.7% (flashmla)"
    assert "ahead on 2, behind on 1" in text and "torch_bmm: skipped: not asked on the GPU" in text
    assert "flashmla:out: copied into the harness's buffers" in text and "--by-trial`" in text


def test_the_command_line_renders_it_from_json_into_the_devlogs_serving_block(tmp_path: Path, capsys) -> None:
    data = {"meta": META, "rows": [dataclasses.asdict(r) | {"correct_text": r.correct} for r in _rows()]}
    (tmp_path / "s.json").write_text(json.dumps(data))
    devlog = tmp_path / "mla.md"
    devlog.write_text("# MLA\n\n<!-- kforge:peers:start -->\npeers table\n<!-- kforge:peers:end -->\n")
    assert main(["--from-json", str(tmp_path / "s.json"), "--by-trial", "--out", str(tmp_path / "s.md"),
                 "--devlog", str(devlog)]) == 0
    text = devlog.read_text()
    assert "peers table" in text and "<!-- kforge:serving:start -->" in text and "| serve_b1 |" in text
    assert (tmp_path / "s.md").read_text() in capsys.readouterr().out


def test_the_committed_serving_json_renders_gzipped_as_the_devlog_shows_it(capsys) -> None:
    """docs/kernels/mla/serving/*.json.gz (gzipped for the checkout's budget) re-renders through --from-json; the
    devlog's serving block is that rendering (run 31's H200 table)."""
    root = Path(__file__).resolve().parents[1]
    src = root / "docs" / "kernels" / "mla" / "serving" / "20261207-h200-serving.json.gz"
    assert main(["--kernel", "mla", "--from-json", str(src), "--by-trial"]) in (0, 1)
    out = capsys.readouterr().out
    assert "| serve_b1 | b=1 s=1 h=128 t=8191 |" in out
    assert out.split("| trial |", 1)[1].splitlines()[3] in (root / "docs" / "kernels" / "mla.md").read_text()


def test_the_version_host_column_shows_back_to_back_and_timed_round_when_measured() -> None:
    rows = _rows()
    for c in rows[0].cells.values():
        c.host_b2b_us = 4.2
    text = render_by_trial(rows, META, "python -m benchmarks.compare ... --by-trial")
    assert _line(text, "trial")[-1] == "v59_cute host us, back to back / one timed round"
    assert _line(text, "serve_tp8")[-1] == "4.2 / 8.5"
