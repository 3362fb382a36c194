"""The clock witness's arithmetic and its refusals on a machine without a GPU."""

from __future__ import annotations

import math

import pytest

from pytest_kforge import clockwitness as cw


def test_spin_mhz_is_cycles_per_microsecond():
    assert cw.spin_mhz(1_980_000, 1.0) == pytest.approx(1980.0)
    assert cw.spin_mhz(1_778_000, 1.0) == pytest.approx(1778.0)
    with pytest.raises(ValueError, match="cannot take"):
        cw.spin_mhz(1000, 0.0)


def test_burst_outlasts_the_spin():
    # a 1 ms kernel under a 50 ms spin: 65 launches cover 1.3x the window, plus one
    assert cw.launches_for(50.0, 1.0) == 66
    assert cw.launches_for(50.0, 1.0) * 1.0 >= 50.0 * cw.COVER
    assert cw.launches_for(50.0, 1000.0) == 2  # a long kernel: still two launches
    assert cw.launches_for(50.0, 1e-6) == cw.MAX_LAUNCHES == 1000  # a tiny one is capped (CUDA queue depth)
    with pytest.raises(ValueError):
        cw.launches_for(50.0, 0.0)


def test_witness_line_names_both_clocks_and_warns_when_uncovered():
    w = cw.Witness(mhz=1778.0, idle_mhz=1980.0, kernel_ms=0.943, launches=70, window_ms=50.0, covered=True,
                   nvml_mhz=(1980, 1980))
    assert w.ratio == pytest.approx(1778 / 1980)
    line = w.line("v23_cute spec")
    assert "1778 MHz" in line and "1980 MHz" in line and "943.0 us" in line and "WARNING" not in line
    bad = cw.Witness(mhz=1900.0, idle_mhz=1980.0, kernel_ms=0.05, launches=2, window_ms=50.0, covered=False)
    assert "WARNING" in bad.line("x") and "NVML not available" in bad.line("x")
    assert math.isnan(cw.Witness(1.0, 0.0, 1.0, 2, 1.0, True).ratio)


def test_cli_refuses_without_a_gpu_or_a_job(capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; the refusal is for CPU machines")
    assert cw.main(["--gemm", "64"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("ERROR: no CUDA GPU is visible")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cw.main(["--window-ms", "0", "--gemm", "64"]) == 2
    assert "--window-ms 0.0" in capsys.readouterr().out
    assert cw.main([]) == 2
    assert "nothing to witness" in capsys.readouterr().out


def test_summary_gives_cycles_that_a_clock_change_does_not_move():
    # devlog run 10: v28_cute 74.7 us at 1767 MHz and v29_cute 77.7 us at 1695 MHz on decode
    a = cw.summary(cw.Witness(1767.2, 1977.0, 0.07, 935, 55.9, True, (1980, 1980)), 74.7)
    b = cw.summary(cw.Witness(1695.0, 1977.0, 0.07, 928, 58.3, True, (1980,)), 77.7)
    assert a["kcycles"] == pytest.approx(132.01, abs=0.01) and b["kcycles"] == pytest.approx(131.70, abs=0.01)
    assert abs(a["kcycles"] / b["kcycles"] - 1) < 0.003 < abs(74.7 / 77.7 - 1)
    assert a["nvml_mhz"] == [1980, 1980] and "kcycles" not in cw.summary(cw.Witness(1.0, 2.0, 1.0, 2, 1.0, False))
