"""CuTe DSL MLA versions: contract checks that run anywhere, numerics that need the GPU."""

from __future__ import annotations

import importlib
import inspect
import math
from pathlib import Path

import pytest

from pytest_kforge.registry import load_version

KDIR = Path(__file__).resolve().parents[1] / "kernels"
CUTE_VERSIONS = sorted(p.stem for p in (KDIR / "mla").glob("v*_cute.py"))
HS = (16, 32, 64, 128)


def _host():
    load_version("mla", "v0", kernels_dir=KDIR)  # makes kforge_kernels.mla importable
    return importlib.import_module("kforge_kernels.mla._cute_host")


@pytest.mark.parametrize("name", CUTE_VERSIONS)
def test_cute_version_module_contract(name: str) -> None:
    v = load_version("mla", name, kernels_dir=KDIR)
    assert v.language == "cute-dsl"
    assert v.parent is not None and v.parent in {"v0", *CUTE_VERSIONS} and v.parent != name
    assert isinstance(v.config, dict) and "num_splits" in v.config
    sig = inspect.signature(v.module.run)
    assert list(sig.parameters)[:5] == ["q", "kv_cache", "block_table", "cache_seqlens", "softmax_scale"]
    for kw in ("out", "lse", "config"):
        assert sig.parameters[kw].kind is inspect.Parameter.KEYWORD_ONLY
    for h in HS:
        for s in (1, 2, 7, 16):
            assert v.supports({"b": 32, "s": s, "t": 4096, "h": h}) is None, (name, s, h)


def test_choose_splits_fills_the_machine() -> None:
    host = _host()
    assert host.choose_splits(32 * 2, 64, {}) == 2  # decode: 64 CTAs -> 128 of 132 SMs
    assert host.choose_splits(32 * 32, 64, {}) == 1  # spec: 1024 CTAs already fill the waves
    assert host.choose_splits(64, 3, {"num_splits": 5}) == 3  # never more splits than pages
    assert host.choose_splits(64, 1, {}) == 1
    for units in range(1, 300):
        sp = host.choose_splits(units, 10_000, {})
        eff = units * sp / (math.ceil(units * sp / 132) * 132)
        best = max(units * k / (math.ceil(units * k / 132) * 132) for k in range(1, 17))
        assert 1 <= sp <= 16 and eff >= best - 0.05 - 1e-9, (units, sp, eff, best)


def test_check_inputs_rejects_wrong_dtypes_in_one_sentence() -> None:
    import torch

    host = _host()
    q = torch.zeros(1, 1, 16, 576, dtype=torch.float16)
    kv = torch.zeros(2, 64, 576, dtype=torch.bfloat16)
    bt, lens = torch.zeros(1, 1, dtype=torch.int32), torch.ones(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="bfloat16") as exc:
        host.check_inputs(q, kv, bt, lens)
    assert str(exc.value).count(". ") == 0
    with pytest.raises(ValueError, match="int32"):
        host.check_inputs(q.bfloat16(), kv, bt.long(), lens)
    host.check_inputs(q.bfloat16(), kv, bt, lens)  # valid: no exception


@pytest.mark.parametrize("name", CUTE_VERSIONS)
def test_cute_version_rejects_unsupported_ring_depth_before_compiling(name: str) -> None:
    import torch

    v = load_version("mla", name, kernels_dir=KDIR)
    with pytest.raises(ValueError, match="stages=2"):
        v.module.run(torch.zeros(1), None, None, None, 0.1, out=None, lse=None, config={"stages": 3})


def test_selfcheck_fuzz_covers_the_contract() -> None:
    load_version("mla", "v0", kernels_dir=KDIR)
    sc = importlib.import_module("kforge_kernels.mla._cute_selfcheck")
    hs = {h for _, _, h, _, _ in sc.FUZZ}
    assert hs == set(HS)
    assert {s for _, s, _, _, _ in sc.FUZZ} >= {1, 16}
    for b, s, _, lens, cfg in sc.FUZZ:
        assert len(lens) == b and min(lens) >= s
    all_lens = [t for *_, lens, _ in sc.FUZZ for t in lens]
    assert any(t % 64 for t in all_lens) and max(all_lens) > 4096
    # at least one case forces more splits than a short sequence has pages (empty splits)
    assert any(cfg.get("num_splits", 0) > math.ceil(min(lens) / 64) for *_, lens, cfg in sc.FUZZ)


def _gpu_ready() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        importlib.import_module("cutlass.cute")
    except Exception as exc:  # noqa: BLE001
        return f"CuTe DSL not importable: {exc}"
    return None


@pytest.mark.parametrize("name", CUTE_VERSIONS)
@pytest.mark.parametrize(
    "b,s,h,lens,cfg",
    [(2, 1, 128, [100, 4100], {}), (3, 4, 16, [4, 64, 700], {"num_splits": 4}), (2, 16, 64, [16, 1234], {})],
)
def test_cute_version_matches_reference_on_gpu(name, b, s, h, lens, cfg) -> None:
    why = _gpu_ready()
    if why:
        pytest.skip(why)
    import torch

    from pytest_kforge.spec import compare_outputs, poison_

    v = load_version("mla", name, kernels_dir=KDIR)
    params = {"b": b, "s": s, "t": max(lens), "h": h}
    inputs = v.spec.make_inputs(params, seed=3, device="cuda", seqlens=lens)
    outs = v.spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    v(config=cfg, **inputs, **outs)
    torch.cuda.synchronize()
    ref = v.spec.reference(inputs)
    for n in v.spec.output_names:
        res = compare_outputs(n, outs[n], ref[n], v.spec.tolerances[n])
        assert res.ok, res.message
