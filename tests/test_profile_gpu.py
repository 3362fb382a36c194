"""On the H200 only: profile mla v0 on decode under the real ncu (skips on CPU or without ncu)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (ncu profiles GPU kernels)"),
    pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute's ncu on PATH"),
]
ROOT = Path(__file__).resolve().parents[1]


def test_profile_v0_decode_with_real_ncu(tmp_path: Path) -> None:
    from pytest_kforge.profile.run import profile_version

    (tmp_path / "docs" / "kernels").mkdir(parents=True)
    [out] = profile_version("mla", "v0", ["decode"], root=tmp_path, kernels_dir=ROOT / "kernels", timeout_s=300)
    assert out.fault is None, out.fault
    data = json.loads(out.json_path.read_text())
    assert data["metrics"]["duration_us"] > 0 and data["metrics"]["num_launches"] >= 1
    assert out.wall_s < 120, f"profiling took {out.wall_s:.0f} s"
