"""kernels/mla/tools/split_model.py (issue 35's ragged-serving design check) on the CPU: the model's schedules agree
where they must and order where the lengths say they should."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    from pytest_kforge.registry import load_kernel

    load_kernel("mla", ROOT / "kernels")  # makes the kforge_kernels package importable
    return importlib.import_module("kforge_kernels.mla.tools.split_model")


def test_uniform_lengths_gain_nothing_from_balancing() -> None:
    sm = _tool()
    decode = sm.Shape("decode", (64,) * 32, 2)
    cfg = {"num_splits": 0, "sm_count": 132, "stages": 2, "max_splits": 64}
    today = sm.makespan(sm.today_works(decode, cfg, "sm90_seesaw_pair_stale_onesplit"), 8.0)
    # 2 paired splits x 64 tiles = 128 CTAs of 32 pages: one wave, 8 + 32 x 1.56 us
    assert today == pytest.approx(8.0 + 32 * sm.PER_PAGE_US)
    assert sm.best_uniform(decode, 8.0, 6) == (pytest.approx(today), 32)
    assert sm.bins_makespan(decode, 8.0) == pytest.approx(today)


def test_ragged_lengths_follow_the_longest_today_and_the_mean_when_balanced() -> None:
    sm = _tool()
    # one long sequence among short ones: today's equal split count leaves its CTAs running alone
    shape = sm.Shape("skew", (120,) + (8,) * 31, 2)
    cfg = {"num_splits": 0, "sm_count": 132, "stages": 2}
    today = sm.makespan(sm.today_works(shape, cfg, "sm90_seesaw_pair_stale_onesplit"), 8.0)
    assert today == pytest.approx(8.0 + 60 * sm.PER_PAGE_US)  # 120 pages in 2 splits
    uniform, chunk = sm.best_uniform(shape, 8.0, 6)
    assert uniform < today and chunk < 60
    assert sm.bins_makespan(shape, 8.0) < today
    assert sm.makespan([0, 0, 3], 8.0) == pytest.approx(8.0 + 3 * sm.PER_PAGE_US)  # empty CTAs cost nothing


def test_the_tool_prints_its_table_and_refuses_an_odd_grid_depth() -> None:
    tool = ROOT / "kernels" / "mla" / "tools" / "split_model.py"
    ran = subprocess.run([sys.executable, str(tool), "--trials", "decode,serve_ragged", "--fixed", "8"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "| serve_ragged | 1.76 | 8 |" in ran.stdout and "| decode | 1.00 | 8 | 73.2 |" in ran.stdout
    bad = subprocess.run([sys.executable, str(tool), "--max-splits", "5"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "--max-splits must be an even number" in bad.stderr
    unknown = subprocess.run([sys.executable, str(tool), "--trials", "nope"], capture_output=True, text=True,
                             timeout=120, cwd=ROOT)
    assert unknown.returncode == 2 and "unknown trial(s) nope" in unknown.stderr
    torch_version = subprocess.run([sys.executable, str(tool), "--version", "v0"], capture_output=True, text=True,
                                   timeout=120, cwd=ROOT)
    assert torch_version.returncode == 2 and "v0 is not a version_functions CuTe version" in torch_version.stderr
