"""The cuTile versions of mla and softmax: contract checks that run anywhere, correctness on a GPU.

CPU part: every cuTile module imports without cuTile installed, declares the registry contract
(language, parent chain, description, CONFIG), validates its inputs in one sentence, and its pure
helpers (split-count choice, row blocking) behave.  GPU part (skipped without CUDA + cuTile):
each version against the float32 reference on small shapes, outputs NaN-poisoned first.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_kforge.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
MLA_CUTILE = ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v11"]
PARENTS = {"v1": "v0", "v2": "v1", "v3": "v2", "v4": "v3", "v5": "v3", "v6": "v5", "v7": "v6", "v8": "v6", "v11": "v3"}


@pytest.fixture(scope="module")
def mla():
    return Registry(ROOT / "kernels").kernel("mla")


@pytest.fixture(scope="module")
def softmax():
    return Registry(ROOT / "kernels").kernel("softmax")


def _common():
    Registry(ROOT / "kernels").kernel("mla")  # installs the kforge_kernels package
    from kforge_kernels.mla.cutile import common as _cutile_common

    return _cutile_common


def _cutile_importable() -> bool:
    try:
        return importlib.util.find_spec("cuda.tile") is not None
    except (ImportError, ValueError):
        return False


# ---- contract -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MLA_CUTILE)
def test_mla_version_contract(mla, name):
    v = mla.version(name)
    assert v.language == "cutile-dsl"
    assert v.parent == PARENTS[name]
    assert v.description and "\n" not in v.description
    assert v.config["BLOCK_H"] // v.config.get("NUM_CTAS", 1) == 64  # 64 rows per CTA (wgmma)
    assert v.supports({"b": 32, "s": 16, "t": 4096, "h": 128}) is None


def test_split_versions_expose_split_knobs(mla):
    for name in ("v2", "v3", "v4"):
        cfg = mla.version(name).config
        assert {"NUM_SPLITS", "WAVES", "MIN_PAGES", "COMBINE_ROWS", "NUM_WORKER_WARPS"} <= set(cfg)
    assert mla.version("v4").config["KV_ONCE"] is True
    assert mla.version("v3").config["PARTIAL_DTYPE"] in ("bf16", "fp32")


def test_softmax_v1_contract(softmax):
    v = softmax.version("v1")
    assert v.language == "cutile-dsl" and v.parent == "v0"
    assert v.supports({"rows": 4096, "cols": 8192}) is None
    assert "exceeds" in v.supports({"rows": 4, "cols": 1 << 15})


@pytest.mark.skipif(_cutile_importable(), reason="cuda.tile is installed here; the missing-toolchain path is moot")
def test_missing_toolchain_is_reported_not_crashed(mla):
    v = mla.version("v1")
    err = v.toolchain_missing()
    assert err is not None and "cuda.tile" in str(err)


# ---- input validation (torch CPU tensors; the check runs before any launch) -------------------
def _mla_tensors(b=2, s=1, h=16, t=100):
    from kforge_kernels.mla.spec import SPEC

    params = {"b": b, "s": s, "h": h, "t": t}
    return SPEC.make_inputs(params, seed=0), SPEC.alloc_outputs(params)


@pytest.mark.parametrize("name", MLA_CUTILE)
def test_mla_rejects_wrong_out_shape(mla, name):
    import torch

    ins, outs = _mla_tensors()
    outs["out"] = torch.empty(2, 1, 16, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"out must be \[2, 1, 16, 512\]"):
        mla.version(name).fn(**ins, **outs)


@pytest.mark.parametrize("name", MLA_CUTILE)
def test_mla_rejects_unknown_config_key(mla, name):
    ins, outs = _mla_tensors()
    with pytest.raises(ValueError, match="unknown config key 'BLOK_H'"):
        mla.version(name).fn(**ins, **outs, config={"BLOK_H": 64})


def test_check_shapes_reads_sizes():
    cc = _common()
    ins, outs = _mla_tensors(b=3, s=4, h=32, t=130)
    shp = cc.check_shapes(ins["q"], ins["kv_cache"], ins["block_table"], ins["cache_seqlens"], outs["out"], outs["lse"])
    assert (shp.b, shp.s, shp.h, shp.rows, shp.max_pages) == (3, 4, 32, 128, 3)


def test_check_shapes_rejects_non_contiguous_q():
    cc = _common()
    ins, outs = _mla_tensors(b=2, s=2, h=16, t=70)
    q = ins["q"].transpose(1, 2)  # [b, h, s, d] strides, shape [2, 16, 2, 576]
    with pytest.raises(ValueError):
        cc.check_shapes(q, ins["kv_cache"], ins["block_table"], ins["cache_seqlens"], outs["out"], outs["lse"])


# ---- split-count choice ---------------------------------------------------------------------
def test_trial_split_counts(mla):
    v2 = mla.version("v2").module
    cfg = dict(mla.version("v2").config)
    # decode: 32 sequences x 2 row tiles = 64 CTAs on 132 SMs -> 2 splits (128 CTAs, one wave)
    assert v2.pick_splits(32, 1, 128, 64, cfg) == 2
    # spec: 32 x 32 row tiles = 1024 CTAs already -> no split, v3/v4 take the direct path
    assert v2.pick_splits(32, 16, 128, 64, cfg) == 1
    # stress: 4 sequences x 4 row tiles, 512 pages -> 8 splits: 128 CTAs, one full wave
    # (16 splits would be 2 waves of half the work each: no faster, twice the combine)
    assert v2.pick_splits(4, 2, 128, 512, cfg) == 8
    assert v2.pick_splits(4, 2, 128, 512, {**cfg, "NUM_SPLITS": 5}) == 5
    assert v2.pick_splits(4, 2, 128, 3, {**cfg, "NUM_SPLITS": 5}) == 3  # never more splits than pages


@settings(max_examples=100, deadline=None)
@given(b=st.integers(1, 64), tiles=st.integers(1, 32), pages=st.integers(1, 1024),
       sms=st.sampled_from([108, 132, 148]), min_pages=st.integers(1, 16))
def test_choose_splits_properties(b, tiles, pages, sms, min_pages):
    cc = _common()
    n = cc.choose_splits(b, tiles, pages, sms, min_pages=min_pages)
    assert 1 <= n <= 32
    if b * tiles >= sms:
        assert n == 1
    if n > 1:
        assert pages // n >= min_pages - (pages % n > 0)  # splits are not finer than asked
        assert b * tiles * n <= 2 * sms * cc.cdiv(pages, min_pages)  # no absurd over-splitting


def test_choose_splits_rejects_empty_shapes():
    cc = _common()
    with pytest.raises(ValueError, match="positive sizes"):
        cc.choose_splits(0, 1, 10)


def test_block_h_must_be_a_power_of_two_tile():
    cc = _common()
    cc.check_block_h(64)
    with pytest.raises(ValueError, match="BLOCK_H must be"):
        cc.check_block_h(48)


def test_softmax_block_rows(softmax):
    m = softmax.version("v1").module
    assert m.next_pow2(1000) == 1024 and m.next_pow2(1024) == 1024 and m.next_pow2(1) == 1
    assert m.block_rows(8192, None) == 1
    assert m.block_rows(1024, None) == 8
    assert m.block_rows(100, None) == 16
    assert m.block_rows(100, 4) == 4
    with pytest.raises(ValueError, match="power of two"):
        m.block_rows(100, 3)


# ---- the kernels' tiling arithmetic, replayed in torch on the CPU ------------------------------
def _replay(ins, block_h, n_splits, page=64, dv=512, lazy_th=None):
    """The v2-v6 algorithm step for step (row tiles, per-sequence split ranges, full/masked pages,
    exp2 online softmax from m=-1e30 with -inf masks, bf16 P, log2 partials, weighted combine).
    ``lazy_th``: v6's lazy rescaling (m moves only when some row's max grows by more than it)."""
    import math

    import torch

    q, kv, bt, lens = ins["q"].float(), ins["kv_cache"].float(), ins["block_table"], ins["cache_seqlens"]
    b, s, h, _ = q.shape
    rows_n = s * h
    c = float(ins["softmax_scale"]) / math.log(2.0)
    out = torch.empty(b, rows_n, dv)
    lse = torch.empty(b, h, s)
    for bi in range(b):
        t = int(lens[bi])
        n_pages, n_full = -(-t // page), (t - s + 1) // page
        pps = -(-n_pages // n_splits)
        for rt in range(-(-rows_n // block_h)):
            rows = rt * block_h + torch.arange(block_h)
            qt = torch.zeros(block_h, 576)
            valid = rows < rows_n
            qt[valid] = q[bi].reshape(rows_n, 576)[rows[valid]]
            limit = torch.minimum(t - s + rows // h, torch.tensor(t - 1))[:, None]
            parts = []
            for sp in range(n_splits):
                m = torch.full((block_h, 1), -1e30)
                l_i = torch.zeros(block_h, 1)
                acc = torch.zeros(block_h, dv)
                for j in range(sp * pps, min(sp * pps + pps, n_pages)):
                    tile = kv[int(bt[bi, j])]
                    sc = (qt @ tile.T) * c
                    if j >= n_full:
                        sc = torch.where(j * page + torch.arange(page)[None, :] <= limit, sc, -math.inf)
                    m_new = torch.maximum(m, sc.max(1, keepdim=True).values)
                    if lazy_th is None or float((m_new - m).max()) > lazy_th:
                        alpha = torch.exp2(m - m_new)
                        l_i, acc, m = l_i * alpha, acc * alpha, m_new
                    p = torch.exp2(sc - m)
                    assert lazy_th is None or float(p.max()) <= 2.0 ** lazy_th  # bf16 P stays small
                    l_i = l_i + p.sum(1, keepdim=True)
                    acc = acc + p.bfloat16().float() @ tile[:, :dv]
                parts.append((acc / torch.where(l_i > 0, l_i, 1.0), m + torch.log2(l_i)))
            lmax = torch.stack([x[1] for x in parts]).max(0).values
            w = [torch.exp2(x[1] - lmax) for x in parts]
            den = sum(w)
            o = sum(wi * x[0] for wi, x in zip(w, parts)) / den
            ls = ((lmax + torch.log2(den)) * math.log(2.0)).reshape(-1)
            r = rows[valid]
            out[bi, r] = o[valid]
            lse[bi, r % h, r // h] = ls[valid]
    return {"out": out.reshape(b, s, h, dv), "lse": lse}


@pytest.mark.parametrize("case", [(2, 1, 16, [1, 200], 1), (2, 3, 16, [3, 130], 4), (1, 16, 16, [140], 3),
                                  (2, 2, 32, [64, 65], 2)], ids=lambda c: f"b{c[0]}-s{c[1]}-h{c[2]}-ns{c[4]}")
@pytest.mark.parametrize("lazy_th", [None, 8.0])
def test_tiling_arithmetic_matches_reference(mla, case, lazy_th):
    b, s, h, lens, ns = case
    params = {"b": b, "s": s, "h": h, "t": max(lens)}
    ins = mla.spec.make_inputs(params, seed=5, seqlens=lens)
    for r in mla.spec.compare(_replay(ins, 64, ns, lazy_th=lazy_th), mla.spec.reference(ins)):
        assert r.ok, r.message


def test_lazy_rescale_handles_a_growing_max(mla):
    """Scores that grow along the sequence force real rescales (th=0) and stale maxima (th=8)."""
    import torch

    params = {"b": 1, "s": 2, "h": 16, "t": 300}
    ins = mla.spec.make_inputs(params, seed=9, seqlens=[300])
    ramp = torch.linspace(0.0, 3.0, ins["kv_cache"].shape[0])[:, None, None]
    ins["kv_cache"] = (ins["kv_cache"].float() * (1.0 + ramp)).bfloat16()
    ref = mla.spec.reference(ins)
    for th in (0.0, 8.0):
        for r in mla.spec.compare(_replay(ins, 64, 2, lazy_th=th), ref):
            assert r.ok, (th, r.message)


# ---- v5+ cached launch plans ----------------------------------------------------------------
def test_plan_is_built_once_per_shape_and_config(mla):
    mla.version("v5")  # installs the package
    from kforge_kernels.mla.cutile import plan as plan

    plan.clear()
    built = []

    def build(shp, cfg, like):
        built.append((shp, cfg["NUM_SPLITS"]))
        return plan.Plan(kernel=None, grid=(1, shp.b, 1), workspaces=(), consts=())

    ins, outs = _mla_tensors(b=2, s=1, h=16, t=100)
    tensors = (ins["q"], ins["kv_cache"], ins["block_table"], ins["cache_seqlens"], outs["out"], outs["lse"])
    defaults = {"NUM_SPLITS": None}
    p1 = plan.get("t", defaults, None, tensors, build)
    assert plan.get("t", defaults, None, tensors, build) is p1 and len(built) == 1
    plan.get("t", defaults, {"NUM_SPLITS": 3}, tensors, build)
    assert [x[1] for x in built] == [None, 3]
    ins3, outs3 = _mla_tensors(b=3, s=1, h=16, t=100)
    p3 = plan.get("t", defaults, None, (ins3["q"], ins3["kv_cache"], ins3["block_table"], ins3["cache_seqlens"],
                                        outs3["out"], outs3["lse"]), build)
    assert p3.grid == (1, 3, 1) and len(built) == 3
    with pytest.raises(ValueError, match="unknown config key"):
        plan.get("t", defaults, {"NUM_SPLIT": 3}, tensors, build)
    plan.clear()


def test_plan_cache_hit_still_rejects_non_contiguous_out(mla):
    import torch

    mla.version("v5")
    from kforge_kernels.mla.cutile import plan as plan

    plan.clear()
    ins, outs = _mla_tensors(b=2, s=2, h=16, t=100)
    build = lambda shp, cfg, like: plan.Plan(kernel=None, grid=(1, 1, 1), workspaces=(), consts=())  # noqa: E731
    plan.get("t", {}, None, (ins["q"], ins["kv_cache"], ins["block_table"], ins["cache_seqlens"],
                             outs["out"], outs["lse"]), build)
    lse_t = torch.empty(2, 2, 16).transpose(1, 2)  # [2, 16, 2] shape, not contiguous
    with pytest.raises(ValueError, match="lse must be contiguous"):
        plan.get("t", {}, None, (ins["q"], ins["kv_cache"], ins["block_table"], ins["cache_seqlens"],
                                 outs["out"], lse_t), build)
    plan.clear()


def test_v6_rejects_bad_lazy_settings(mla):
    ins, outs = _mla_tensors()
    with pytest.raises(ValueError, match="LAZY must be"):
        mla.version("v6").fn(**ins, **outs, config={"LAZY": "sometimes"})
    with pytest.raises(ValueError, match="RESCALE_TH must be"):
        mla.version("v6").fn(**ins, **outs, config={"RESCALE_TH": 40.0})
    with pytest.raises(ValueError, match="BLOCK_H / NUM_CTAS must be 64"):
        mla.version("v8").fn(**ins, **outs, config={"NUM_CTAS": 1})
    with pytest.raises(ValueError, match="PIPE_QK must be"):
        mla.version("v7").fn(**ins, **outs, config={"PIPE_QK": True})


def test_sweep_variants_are_valid_configs(mla):
    import importlib.util as iu

    spec = iu.spec_from_file_location("cutile_sweep", ROOT / "kernels/mla/tools/cutile_sweep.py")
    sweep = iu.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    assert sweep.VARIANTS[: len(sweep.MANUAL)] == sweep.MANUAL and len(sweep.VARIANTS) <= 24
    for version, over, why in sweep.VARIANTS:
        v = mla.version(version)
        assert set(over) <= set(v.config), (version, over)
        assert why


# ---- GPU correctness ------------------------------------------------------------------------
def _gpu_ready() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not _cutile_importable():
        return "cuda.tile is not installed"
    return None


GPU_SKIP = _gpu_ready()
# longest lengths of 4033..4096 (64 pages) keep one compile class per kernel (see _cutile_selfcheck)
GPU_CASES = [(2, 1, 16, [1, 4090]), (2, 16, 128, [16, 4033]), (3, 3, 64, [129, 64, 4096])]


@pytest.mark.skipif(GPU_SKIP is not None, reason=f"GPU test: {GPU_SKIP}")
@pytest.mark.parametrize("name", MLA_CUTILE)
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: f"b{c[0]}-s{c[1]}-h{c[2]}")
def test_mla_matches_reference_on_gpu(mla, name, case):
    import torch

    from pytest_kforge.spec import poison_

    b, s, h, lens = case
    v = mla.version(name)
    params = {"b": b, "s": s, "h": h, "t": max(lens)}
    ins = mla.spec.make_inputs(params, seed=3, device="cuda", seqlens=lens)
    outs = mla.spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    v.fn(**ins, **outs, config=dict(v.config))
    torch.cuda.synchronize()
    for r in mla.spec.compare(outs, mla.spec.reference(ins)):
        assert r.ok, r.message


@pytest.mark.skipif(GPU_SKIP is not None, reason=f"GPU test: {GPU_SKIP}")
@pytest.mark.parametrize("shape", [(100, 1000), (64, 8192), (3, 17)])
def test_softmax_v1_matches_reference_on_gpu(softmax, shape):
    import torch

    from pytest_kforge.spec import poison_

    params = {"rows": shape[0], "cols": shape[1]}
    v = softmax.version("v1")
    ins = softmax.spec.make_inputs(params, seed=1, device="cuda")
    outs = softmax.spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    v.fn(**ins, **outs, config=dict(v.config))
    torch.cuda.synchronize()
    for r in softmax.spec.compare(outs, softmax.spec.reference(ins)):
        assert r.ok, r.message
