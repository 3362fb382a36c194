"""kernels/mla/tools/ptx_hashes.py without compiling: symbol normalisation and the recorded-hash comparison."""

from __future__ import annotations

import importlib
from pathlib import Path

from pytest_kforge.registry import load_version

KDIR = Path(__file__).resolve().parents[1] / "kernels"


def _tool():
    load_version("mla", "v0", kernels_dir=KDIR)  # installs kforge_kernels.mla
    return importlib.import_module("kforge_kernels.mla.tools.ptx_hashes")


PTX = """.visible .entry kernel_cutlass_kernel_kforge_kernelsmla{mod}MlaCombine_object_at__tensorptr{sig}_0(
\t.param .align 8 .b8 kernel_cutlass_kernel_kforge_kernelsmla{mod}MlaCombine_object_at__tensorptr{sig}_0_param_0[16]
)
{{
\tcall.uni helper_{mod};
\t{op}.f32 %f1, %f2, %f3;
}}
.func helper_{mod}()
"""


def test_a_moved_module_normalises_to_the_same_ptx_and_a_changed_instruction_does_not() -> None:
    ph = _tool()
    before = PTX.format(mod="_cute_combine", sig="f32gm", op="add")
    after = PTX.format(mod="cutecombine", sig="f32gmem", op="add")  # the name is cut at a fixed length
    assert before != after and ph.normalise(before) == ph.normalise(after)
    assert "@sym0_param_0" in ph.normalise(after) and "call.uni @sym1" in ph.normalise(after)
    assert ph.normalise(PTX.format(mod="cutecombine", sig="f32gmem", op="mul")) != ph.normalise(after)


def test_compare_names_the_kernels_that_differ_and_versions_not_recorded() -> None:
    ph = _tool()
    rec = {"v1_cute": {"sha256": "a", "kernels": {"k:main": {"sha256": "1"}, "k:combine": {"sha256": "2"}}}}
    same = {"v1_cute": {"sha256": "a", "kernels": rec["v1_cute"]["kernels"]}}
    assert ph.compare(same, rec) == []
    changed = {"v1_cute": {"sha256": "b", "kernels": {"k:main": {"sha256": "1"}, "k:combine": {"sha256": "3"}}},
               "v2_cute": {"sha256": "c", "kernels": {}}}
    assert ph.compare(changed, rec) == ["v1_cute: PTX differs in k:combine", "v2_cute: not in the recorded hashes"]


def test_compare_reads_the_small_summary_record() -> None:
    ph = _tool()
    now = {"v1_cute": {"sha256": "b", "kernels": {}}}
    assert ph.compare(now, {"v1_cute": "b"}) == []
    assert ph.compare(now, {"v1_cute": "a"}) == ["v1_cute: PTX differs (rerun both sides with --out for the kernels)"]
