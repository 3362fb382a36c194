"""v51_cute's reader reloads: each KV block of a page has one owner, the warpgroup that reads it last.

Needs the CuTe DSL to import the kernel class (skips where it is not installed, as on the CPU CI); the
schedule itself is only exercised on the GPU (``tools/cute_selfcheck.py --versions v51_cute``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pytest_kforge.registry import load_version

KDIR = Path(__file__).resolve().parents[1] / "kernels"


def _cls(kind: str = "sm90_seesaw_pair_rr"):
    pytest.importorskip("cutlass.cute")
    load_version("mla", "v0", kernels_dir=KDIR)  # makes kforge_kernels.mla importable
    return importlib.import_module("kforge_kernels.mla.cute.kinds").kernel_class(kind)


@pytest.mark.parametrize("kind", ["sm90_seesaw_pair_rr", "sm90_seesaw_pair_rrlate", "sm90_seesaw_pair_rrvr"])
def test_each_block_is_reloaded_by_its_last_reader(kind: str) -> None:
    cls = _cls(kind)
    k = cls(16, 128, direct=True)
    owners = {stage: tuple(k._reload_owner(stage, j) for j in range(9)) for stage in (0, 1)}
    # page A: V_L (0-3) read last by WG0's P_A V_AL; V_R and P_A's block (4-8) by WG1's P_A V_AR
    assert owners[0] == (0, 0, 0, 0, 1, 1, 1, 1, 1)
    # page B: V_R (4-7) by WG1's P_B V_BR (P_B from registers); V_L and P_B's block 8 by WG0's P_B V_BL
    assert owners[1] == (0, 0, 0, 0, 1, 1, 1, 1, 0)
    k._check_reader_reloads()  # the kind's own flags are compatible


def test_flags_whose_releases_are_not_last_reads_are_refused() -> None:
    cls = _cls()
    bad = type("EarlyRelease", (cls,), {"early_release": True})(16, 128, direct=True)
    with pytest.raises(ValueError, match="reader_reloads cannot run with early_release"):
        bad._check_reader_reloads()
    coarse = type("ThreeChunks", (cls,), {"kv_chunks": 3})(16, 128, direct=True)
    with pytest.raises(ValueError, match="64-dim blocks"):
        coarse._reload_owner(0, 0)
