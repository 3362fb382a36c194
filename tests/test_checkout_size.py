"""The checkout stays small enough to travel to the GPU machine (the README's artifact policy)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 4_000_000  # bytes of tracked files


def test_tracked_files_stay_under_four_megabytes() -> None:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = [ROOT / f for f in out.decode().split("\0") if f]
    total = sum(f.stat().st_size for f in files if f.is_file())
    assert total < LIMIT, (f"tracked files take {total:,} bytes (limit {LIMIT:,}); pack raw run artifacts as the "
                           "README's 'Artifacts' section says (python -m pytest_kforge.artifacts pack ...)")
