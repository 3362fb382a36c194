"""CuTe DSL MLA versions: contract checks that run anywhere, numerics that need the GPU."""

from __future__ import annotations

import importlib
import inspect
import math
from pathlib import Path

import pytest

from pytest_kforge.registry import load_version

KDIR = Path(__file__).resolve().parents[1] / "kernels"
CUTE_VERSIONS = sorted(p.stem for p in (KDIR / "mla" / "versions").glob("v*_cute.py"))
HS = (16, 32, 64, 128)


def _host():
    load_version("mla", "v0", kernels_dir=KDIR)  # makes kforge_kernels.mla importable
    return importlib.import_module("kforge_kernels.mla.cute.host")


def _kinds():
    _host()
    return importlib.import_module("kforge_kernels.mla.cute.kinds")


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


def test_host_refuses_unknown_kernels_before_compiling() -> None:
    host = _host()
    with pytest.raises(ValueError, match="sm80_dedup"):
        host.compiled("sm80", 1, 128, 2, direct=True)  # v1's kernel has no direct epilogue
    with pytest.raises(ValueError, match="unknown"):
        _kinds().kernel_class("sm100")
    for redo in ("sm90_seesaw_pair_c3early_redo", "sm90_seesaw_pair_persist_redo"):  # never a call's own kernel
        with pytest.raises(ValueError, match="only runs behind its stale-max kind"):
            host.run_split_combine(None, None, None, None, 1.0, None, None, {}, redo)


@pytest.mark.parametrize("name", CUTE_VERSIONS)
def test_cute_versions_expose_prepare(name: str) -> None:
    v = load_version("mla", name, kernels_dir=KDIR)
    assert callable(getattr(v.module, "prepare", None))


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
    sc = importlib.import_module("kforge_kernels.mla.tools.cute_selfcheck")
    hs = {h for _, _, h, _, _ in sc.FUZZ}
    assert hs == set(HS)
    assert {s for _, s, _, _, _ in sc.FUZZ} >= {1, 16}
    for b, s, _, lens, _cfg in sc.FUZZ:
        assert len(lens) == b and min(lens) >= s
    all_lens = [t for *_, lens, _ in sc.FUZZ for t in lens]
    assert any(t % 64 for t in all_lens) and max(all_lens) > 4096
    # at least one case forces more splits than a short sequence has pages (empty splits)
    assert any(cfg.get("num_splits", 0) > math.ceil(min(lens) / 64) for *_, lens, cfg in sc.FUZZ)


def test_selfcheck_runs_a_probe_kind_as_a_version_with_its_config() -> None:
    """``kind:<kind>[@<version>]``: the version's spec and CONFIG running the kind; an unknown kind is one sentence."""
    load_version("mla", "v0", kernels_dir=KDIR)
    sc = importlib.import_module("kforge_kernels.mla.tools.cute_selfcheck")
    v = sc.load("kind:sm90_seesaw_pair_stale")
    base = load_version("mla", "v35_cute", kernels_dir=KDIR)
    assert v.name == "kind:sm90_seesaw_pair_stale" and v.config == base.config and v.spec is base.spec
    assert v.module.run.__qualname__ == "kind:sm90_seesaw_pair_stale.run"
    assert sc.load("kind:sm90_seesaw_pair_stale@v33_cute").config == load_version("mla", "v33_cute",
                                                                                   kernels_dir=KDIR).config
    with pytest.raises(ValueError, match="unknown CuTe MLA kernel kind 'nope'"):
        sc.load("kind:nope")
    assert sc._stem("kind:a@v35_cute") == "kind_a_v35_cute"


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
    # few distinct (s, h): every one costs a 10-30 s compile per version
    [(2, 1, 128, [100, 4100], {}), (3, 4, 16, [4, 64, 700], {"num_splits": 4})],
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


def _max_rise_inputs(v, b, s, h, lens, rising=(0,)):
    """Inputs whose sequences ``rising`` score ~208 (log2 units) from their second page on, their first page ~7: a
    max that rises that far inside a pair overflows the stale-max kernel's P, so v57_cute must redo those tiles."""
    params = {"b": b, "s": s, "t": max(lens), "h": h}
    inputs = v.spec.make_inputs(params, seed=5, device="cuda", seqlens=lens)
    for i in rising:
        inputs["q"][i] = 3.0  # q . k = 576 * 6 against pages of 2.0: 144 after the scale (1/24), 208 in log2 units
        pages = inputs["block_table"][i, 1:(lens[i] + 63) // 64].long()
        inputs["kv_cache"][pages] = 2.0
    return params, inputs


@pytest.mark.parametrize("name", ["v57_cute", "v58_cute", "v59_cute", "v60_cute"])
@pytest.mark.parametrize("b,s,h,lens,cfg", [
    # split partials merged in pairs, then the combine (15 -> 16 splits; 4 splits)
    (2, 1, 128, [4100, 300], {}), (3, 4, 16, [700, 64, 4], {"num_splits": 4}),
    # the direct outputs: a merged pair (2 splits), and one split (the TMA store epilogue; v58_cute: the
    # persistent loop, with an odd page count in sequence 0, and its in-kernel redo)
    (2, 1, 128, [4100, 300], {"num_splits": 2}), (3, 4, 16, [700, 64, 4], {"num_splits": 1}),
])
def test_stale_max_versions_redo_the_tiles_the_stale_max_overflowed(name, b, s, h, lens, cfg, monkeypatch) -> None:
    why = _gpu_ready()
    if why:
        pytest.skip(why)
    import torch

    from pytest_kforge.spec import compare_outputs, poison_

    v = load_version("mla", name, kernels_dir=KDIR)
    params, inputs = _max_rise_inputs(v, b, s, h, lens)
    ref = v.spec.reference(inputs)
    outs = v.spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    v(config=cfg, **inputs, **outs)
    torch.cuda.synchronize()
    for n in v.spec.output_names:
        res = compare_outputs(n, outs[n], ref[n], v.spec.tolerances[n])
        assert res.ok, res.message
    # patch the host module the version's run really calls (a registry elsewhere may have reloaded kforge_kernels)
    host = inspect.unwrap(v.module.run).__globals__
    if name in ("v58_cute", "v60_cute") and cfg.get("num_splits") == 1:
        # the redo runs inside the kernel, so it cannot be patched out: the stale pair with no fallback (the probe
        # kind) must get these inputs wrong, and v58_cute's flags must all be zero again
        _, _, probe = host["version_functions"]("stale-probe", "sm90_seesaw_pair_stale_vr", v.config)
        poison_(outs)
        probe(**inputs, out=outs["out"], lse=outs["lse"], config=cfg)
        torch.cuda.synchronize()
        assert not all(compare_outputs(n, outs[n], ref[n], v.spec.tolerances[n]).ok for n in v.spec.output_names)
        flags = host["redo_flag_tensors"]()
        assert flags and all(int(t.abs().sum()) == 0 for t in flags)
        return
    if name in ("v59_cute", "v60_cute") and cfg.get("num_splits") != 1:
        return  # v35_cute's exact kernel on these shapes: nothing to redo
    # without the redo launch the first kernel leaves sequence 0's lse poisoned (NaN), the others exact: the
    # inputs do reach the fallback, and only where they should
    monkeypatch.setitem(host, "redo_kind", lambda kind, one_split=False: None)
    outs["lse"].fill_(0.0)  # finite: a NaN now is the kernel's own
    v(config=cfg, **inputs, **outs)
    torch.cuda.synchronize()
    host["reset_redo_flags"]()  # the flags this run set and no redo took
    assert torch.isnan(outs["lse"][0]).any()
    res = compare_outputs("lse", outs["lse"][1:], ref["lse"][1:], v.spec.tolerances["lse"])
    assert res.ok, res.message


@pytest.mark.parametrize("name", ["v57_cute", "v58_cute", "v59_cute", "v60_cute"])
def test_persistent_redo_takes_several_flagged_tiles_per_cta(name) -> None:
    """One split, 2,200 sequences x 2 row blocks = 4,400 tiles on 132 CTAs (33-34 each): CTA 0 takes tiles 0, 132,
    264, ... and the rising sequences 66 and 198 flag its 2nd and 4th (its first processed tile is not its first
    tile, and an unflagged one lies between), sequence 2150 flags CTA 76's 33rd tile (past the 32 flags a warp
    preloads).  The output must be exact and every flag zero again: v57_cute's and v59_cute's redo launch, v58_cute's
    second loop (after the first loop ran all 33-34 tiles of each CTA); v60_cute runs 4,400 one-tile CTAs, three
    of which redo their own tile."""
    why = _gpu_ready()
    if why:
        pytest.skip(why)
    import torch

    from pytest_kforge.spec import compare_outputs, poison_

    v = load_version("mla", name, kernels_dir=KDIR)
    rising = (66, 198, 2150)
    lens = [200 if i in rising else 64 for i in range(2200)]
    params, inputs = _max_rise_inputs(v, 2200, 1, 128, lens, rising)
    ref = v.spec.reference(inputs)
    outs = v.spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    v(config={"num_splits": 1}, **inputs, **outs)
    torch.cuda.synchronize()
    for n in v.spec.output_names:
        res = compare_outputs(n, outs[n], ref[n], v.spec.tolerances[n])
        assert res.ok, res.message
    host = inspect.unwrap(v.module.run).__globals__
    flags = host["redo_flag_tensors"]()
    assert flags and all(int(t.abs().sum()) == 0 for t in flags)


def _emulate_split_combine(inputs, splits: int):
    """The CuTe kernels' index math and softmax, in torch: split ranges, causal limits, safe max,
    per-split (O, lse) partials and the combine.  Guards the formulas the kernels hard-code."""
    import torch

    q, kv = inputs["q"].float(), inputs["kv_cache"].float()
    bt, lens, scale = inputs["block_table"], inputs["cache_seqlens"], float(inputs["softmax_scale"])
    b, s, h, _ = q.shape
    out = torch.empty(b, s * h, 512)
    lse = torch.empty(b, h, s)
    rows = torch.arange(s * h)
    for bi in range(b):
        t = int(lens[bi])
        qr = q[bi].reshape(s * h, 576)
        n_pages = (t + 63) // 64
        chunk = (n_pages + splits - 1) // splits
        first_masked = t - s + 1
        parts = []
        for z in range(splits):
            p0, p1 = z * chunk, min(z * chunk + chunk, n_pages)
            m = torch.full((s * h,), -math.inf)
            acc, ssum = torch.zeros(s * h, 512), torch.zeros(s * h)
            for p in range(p0, p1):
                page = kv[int(bt[bi, p])]
                sc = qr @ page.T
                if p * 64 + 64 > first_masked:
                    limit = first_masked + rows // h - p * 64
                    sc = sc.masked_fill(torch.arange(64)[None, :] >= limit[:, None], -math.inf)
                new = torch.maximum(m, sc.max(dim=1).values)
                safe = torch.where(new == -math.inf, torch.zeros_like(new), new)
                pr = torch.exp((sc - safe[:, None]) * scale)
                corr = torch.exp((m - safe) * scale)
                ssum = ssum * corr + pr.sum(1)
                acc = acc * corr[:, None] + pr @ page[:, :512]
                m = new
            empty = ssum == 0
            o = torch.where(empty[:, None], torch.zeros_like(acc), acc / ssum.clamp_min(1e-30)[:, None])
            lz = torch.where(empty, torch.full_like(ssum, -math.inf), m * scale + torch.log(ssum.clamp_min(1e-30)))
            parts.append((o, lz))
        ls = torch.stack([lz for _, lz in parts])
        top = ls.max(0).values
        w = torch.exp(ls - top)
        den = w.sum(0)
        out[bi] = sum(w[z][:, None] * parts[z][0] for z in range(splits)) / den[:, None]
        lse[bi] = (top + torch.log(den)).reshape(s, h).T
    return {"out": out.reshape(b, s, h, 512), "lse": lse}


@pytest.mark.parametrize("s,h,lens,splits", [(1, 16, [1, 70, 300], 3), (4, 16, [4, 64, 129], 4), (3, 32, [200, 3], 1)])
def test_split_kernel_math_matches_reference(s, h, lens, splits) -> None:
    from pytest_kforge.spec import compare_outputs

    v = load_version("mla", "v0", kernels_dir=KDIR)
    params = {"b": len(lens), "s": s, "t": max(lens), "h": h}
    inputs = v.spec.make_inputs(params, seed=5, seqlens=lens)
    got = _emulate_split_combine(inputs, splits)
    ref = v.spec.reference(inputs)
    for n in v.spec.output_names:
        res = compare_outputs(n, got[n], ref[n], v.spec.tolerances[n])
        assert res.ok, res.message


def _ptxreplay():
    load_version("mla", "v0", kernels_dir=KDIR)
    return importlib.import_module("kforge_kernels.mla.tools.cute_ptxreplay")


def test_dedup_p_tile_layout_is_a_conflict_free_bijection() -> None:
    """sP (v2/v3): every (row, col) has its own cell, group 1's half starts 2048 elements in (an
    offset outside the swizzle bits: the v2 GPU bug was an offset inside them), ldmatrix row reads
    and the accumulator-layout 32-bit stores touch 8 / 32 distinct banks."""
    pr = _ptxreplay()
    cells = {pr.p_cell(r, c) for r in range(64) for c in range(64)}
    assert cells == set(range(4096))
    assert all(pr.p_cell(r, c + 32) - pr.p_cell(r, c) == 2048 for r in range(64) for c in range(32))
    for row0 in range(0, 64, 8):
        for col in range(0, 64, 8):  # one 8x8 ldmatrix matrix: 8 rows of 16 bytes
            groups = {(2 * pr.p_cell(row0 + i, col) // 16) % 8 for i in range(8)}
            assert len(groups) == 8, (row0, col)
        for j in range(0, 64, 8):  # one warp's st.shared.b32 of an n8 accumulator tile
            banks = {(2 * pr.p_cell(row0 + lane // 4, j + 2 * (lane % 4)) // 4) % 32 for lane in range(32)}
            assert len(banks) == 32, (row0, j)


def test_ptx_replay_evaluates_address_arithmetic() -> None:
    pr = _ptxreplay()
    ptx = [
        "\tmov.u32 \t%r2, %tid.x;",
        "\tshl.b32 \t%r3, %r2, 4;",
        "\tand.b32 \t%r4, %r3, 448;",
        "\tshr.u32 \t%r5, %r4, 3;",
        "\txor.b32 \t%r6, %r4, %r5;",
        "\tsetp.eq.b32 \t%p1, %r5, 0;",
        "\tselp.b32 \t%r7, 16, -16, %p1;",
        "\t@%p1 bra \t$L__BB0_2;",
        "\tmad.lo.s32 \t%r8, %r7, 3, %r6;",
    ]
    for tid in (0, 5, 31, 200):
        regs = pr.replay(ptx, tid, len(ptx))
        row = (tid >> 2) & 7
        assert regs["%r6"] == row * 64 ^ row * 8
        step = 16 if row == 0 else (-16) & 0xFFFFFFFF
        assert regs["%r7"] == step and regs["%r8"] == (3 * step + regs["%r6"]) & 0xFFFFFFFF
    assert "instead of 8" in pr.check_p_exchange("\n".join(ptx), 221184)


def test_sm90_kinds_and_partial_dtypes() -> None:
    """v4_cute..v14_cute load; v6_cute/v7_cute write bf16 partials, only v10_cute merges splits itself."""
    names = tuple(f"v{i}_cute" for i in range(4, 15))
    assert len({load_version("mla", n, kernels_dir=KDIR).module.__name__ for n in names}) == len(names)
    kinds = ("sm80", "sm80_dedup", "sm90", "sm90_pvfirst", "sm90_lazy", "sm90_bf16p", "sm90_seesaw",
             "sm90_seesaw_chunked", "sm90_seesaw_early", "sm90_seesaw_fused")
    reg = _kinds()
    assert [reg.bf16_partials(k) for k in kinds] == [False] * 4 + [True, True] + [False] * 4
    assert [reg.fused(k) for k in kinds] == [False] * 9 + [True]
    assert [reg.takes_finals(k) for k in kinds] == [False] * 2 + [True] * 8
    with pytest.raises(ValueError, match="sm90_seesaw_fused"):
        reg.kernel_class("sm91")


def test_ring_probe_kinds_name_exactly_the_probe_classes() -> None:
    """kinds.RING_PROBES restates ringprobe.PROBES' keys (kinds.py must not import the DSL module): keep them equal."""
    pytest.importorskip("cutlass")
    kinds = _kinds()
    rp = importlib.import_module("kforge_kernels.mla.cute.ringprobe")
    assert set(kinds.RING_PROBES) == {f"sm90_seesaw_pair_ring_{k}" for k in rp.PROBES}


def test_only_the_stale_max_kinds_have_a_redo_and_their_redo_kinds_are_exact_and_known() -> None:
    """v57_cute's stale-max kind is followed by a launch of an exact kind (v35_cute's kernel: a guarded full grid, or
    for one-split shapes a persistent loop over the tiles it flagged); v58_cute's kind redoes one-split shapes in
    its own second loop (no launch, flags written) and the others like v57_cute; the probe kinds and every other
    kind have no redo, so no other version's launch sequence changed."""
    reg = _kinds()
    v = load_version("mla", "v57_cute", kernels_dir=KDIR)
    kind, inline = "sm90_seesaw_pair_stale_redo", "sm90_seesaw_pair_stale_inline"
    assert v.module.run.__qualname__ == "v57_cute.run" and reg.redo_kind(kind) == "sm90_seesaw_pair_c3early_redo"
    assert load_version("mla", "v58_cute", kernels_dir=KDIR).module.run.__qualname__ == "v58_cute.run"
    tile_redo = "sm90_seesaw_pair_stale_tileredo"  # v60_cute's: v58_cute's kernel with one CTA per tile
    assert {k for k in reg.KINDS if reg.redo_kind(k)} == {kind, inline, tile_redo}
    assert {k for k in reg.KINDS if reg.writes_redo_flags(k)} == {kind, inline, tile_redo}
    for k in (inline, tile_redo):
        assert reg.redo_kind(k) == "sm90_seesaw_pair_c3early_redo" and reg.redo_kind(k, one_split=True) is None
    assert reg.shape_kind("sm90_seesaw_pair_stale_tileredo_onesplit", one_split=True) == tile_redo
    assert reg.redo_kind(kind, one_split=True) == "sm90_seesaw_pair_persist_redo"
    # v59_cute's per-shape kind: v57_cute's kind for one split, v35_cute's exact one (no redo) otherwise
    per_shape = "sm90_seesaw_pair_stale_onesplit"
    assert load_version("mla", "v59_cute", kernels_dir=KDIR).module.run.__qualname__ == "v59_cute.run"
    assert reg.shape_kind(per_shape, one_split=True) == kind
    assert reg.shape_kind(per_shape, one_split=False) == "sm90_seesaw_pair_c3early"
    assert reg.shape_kind(kind, one_split=False) == kind and reg.redo_kind("sm90_seesaw_pair_c3early") is None
    with pytest.raises(ValueError, match="shape_kind"):
        reg.kernel_class(per_shape)
    for k in (kind, reg.redo_kind(kind), reg.redo_kind(kind, one_split=True)):
        reg.check_kind(k)
        assert not (reg.fused(k) or reg.tail_balanced(k) or reg.bf16_partials(k) or reg.pair_exchange_global(k))
    assert "sm90_seesaw_pair_stale_vr" in reg.PAIR_PROBES and "sm90_seesaw_pair_stale_vr_trace" in reg.KINDS


def test_declared_features_name_knowledge_entries() -> None:
    """Every FEATURES item of an MLA version is a knowledge-base entry (a typo would silently drop nothing)."""
    names = {p.stem for p in (KDIR.parent / "docs" / "knowledge").rglob("*.md") if p.name != "README.md"}
    declared = 0
    for path in sorted(KDIR.glob("mla/versions/v*.py")):
        feats = load_version("mla", path.stem, kernels_dir=KDIR).features
        if feats is None:
            continue
        declared += 1
        assert set(feats) <= names, f"{path.name}: unknown FEATURES {sorted(set(feats) - names)}"
    assert declared >= 11


def test_pairing_kinds_round_splits_up_and_leave_half_the_partials() -> None:
    """v22_cute..v24_cute: 2k splits merge in k clusters of 2; 2 splits write the output directly."""
    host = _host()
    pair_kinds = ("sm90_seesaw_pair", "sm90_seesaw_pair_bf16", "sm90_seesaw_pair_l2")
    for kind in pair_kinds:
        assert host.split_plan(kind, 1) == (1, 1, False)  # spec: one split, no cluster
        assert host.split_plan(kind, 2) == (2, 1, True)  # decode: one pair, direct
        assert host.split_plan(kind, 3) == (4, 2, True)
        assert host.split_plan(kind, 16) == (16, 8, True)
    assert host.split_plan("sm90_seesaw_ownp_evict", 3) == (3, 3, False)
    assert [_kinds().pair_exchange_global(k) for k in pair_kinds] == [False, False, True]


def test_barrier_sites_reports_a_named_barrier_duplicated_into_two_paths() -> None:
    """The PTX shape of run 9's probe hang: one bar.arrive copied into both sides of a branch."""
    pr = _ptxreplay()
    ptx = ("\tbar.sync \t0;\n\t@%p71 bra \t$L__BB0_99;\n\tbar.arrive 4, 256;\n\tbra.uni \t$L__BB0_100;\n"
           "$L__BB0_99:\n\tbar.arrive 4, 256;\n$L__BB0_100:\n\tbar.sync \t5, 256;\n")
    assert pr.barrier_sites(ptx) == {"bar.arrive 4": 2}
    assert pr.barrier_sites(ptx.replace("$L__BB0_99:\n\tbar.arrive 4, 256;\n", "$L__BB0_99:\n")) == {}


def test_compilecheck_reports_wgmma_that_ptxas_serialised() -> None:
    """Run 13's first v36_cute: ptxas serialised every wgmma (C7520) and spec ran 46% slower; the compile
    check fails on that note and names the reason once, and a clean ptxas -v report passes."""
    _host()
    cc = importlib.import_module("kforge_kernels.mla.tools.cute_ptxas")
    note = ("ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
            "to program dependence on compiler-inserted WG.AR in divergent path in the function 'kernel_x'")
    clean = ("ptxas info    : (C7519) warpgroup.arrive is injected in around line 792 by compiler to allow use of "
             "registers in GMMA in function 'kernel_x'\nptxas info    : Used 168 registers, used 16 barriers")
    assert cc.serialized_wgmma(note + "\n" + note + "\n" + clean) == [
        "(C7520) program dependence on compiler-inserted WG.AR in divergent path"]
    assert cc.serialized_wgmma(clean) == []


def test_wgmma_loops_counts_r2ur_in_the_innermost_wgmma_loops_only() -> None:
    """v36_cute's SASS shape: the pair loop moves the shared-memory base R2 -> UR before each barrier wait; the
    outer tile loop and the try-wait retry stubs after the last EXIT (which branch back too) are not reported."""
    _host()
    px = importlib.import_module("kforge_kernels.mla.tools.cute_ptxas")
    lines = []

    def emit(text: str) -> None:
        lines.append(f"        /*{len(lines) * 16:04x}*/                   {text} ;")

    lines.append(".L_x_0:")                                   # outer (tile) loop
    emit("IMAD.U32 R2, RZ, RZ, UR4")
    lines.append(".L_x_1:")                                   # pair loop
    emit("R2UR UR8, R2")
    emit("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8+0x38810], R21")
    emit("@!P0 BRA `(.L_x_9)")
    lines.append(".L_x_5:")                                   # where the retry stub returns to
    emit("HGMMA.64x64x16.F32.BF16 R152, gdesc[UR8], RZ, !UPT")
    emit("@P1 R2UR UR9, R2")
    emit("@P2 BRA `(.L_x_1)")
    emit("@P3 BRA `(.L_x_0)")
    emit("EXIT")
    lines.append(".L_x_9:")                                   # retry stub after the last EXIT
    emit("SYNCS.PHASECHK.TRANS64 P0, [R5+URZ+0x38810], R2")
    emit("BRA `(.L_x_5)")
    loops = px.wgmma_loops("\n".join(lines))
    assert loops == [{"instructions": 6, "hgmma": 1, "r2ur": 2, "syncs": 1}]
    assert px.wgmma_loops("\n".join(ln for ln in lines if "R2UR" not in ln))[0]["r2ur"] == 0


def test_sass_loop_report_says_a_tool_failure_instead_of_raising(monkeypatch, tmp_path) -> None:
    _host()
    px = importlib.import_module("kforge_kernels.mla.tools.cute_ptxas")
    bad = tmp_path / "ptxas"
    bad.write_text("#!/bin/sh\necho 'ptxas fatal: broken' >&2\nexit 1\n")
    bad.chmod(0o755)
    monkeypatch.setattr(px.shutil, "which", lambda name: str(bad) if name == "ptxas" else None)
    monkeypatch.setenv("NVDISASM", str(bad))
    why = px.sass_loop_report("not ptx")
    assert isinstance(why, str) and why.startswith("not checked: CalledProcessError")
    monkeypatch.delenv("NVDISASM")
    assert px.sass_loop_report("not ptx") is None  # no nvdisasm anywhere: not checked, no error


def test_ptxas_cache_notes_label_each_kept_kernel(monkeypatch) -> None:
    """The self-check's ptxas pass: one note per compiled function with kept PTX, labelled by kind and shape."""
    _host()
    px = importlib.import_module("kforge_kernels.mla.tools.cute_ptxas")

    class Fn:
        def __init__(self, ptx: str | None) -> None:
            self.__ptx__ = ptx

    seen = []
    monkeypatch.setattr(px, "ptxas_report", lambda ptx: seen.append(ptx) or ("Used 168 registers", ["(C7520) x"]
                                                                              if "bad" in ptx else []))
    cache = {("k", 16, 128, 2, True, "sm_90a"): (Fn("good"), None, 2048, 32),
             ("k", 1, 128, 2, True, "sm_90a", "paired"): (Fn("bad"), None, 128, 2),
             ("k", 1, 32, 2, False, "sm_90a"): (Fn(None), Fn("good"), 64, 1)}
    notes = px.cache_notes(cache)
    assert [n["kernel"] for n in notes] == ["k s=16 h=128 direct split", "k s=1 h=128 direct paired split",
                                             "k s=1 h=32 combine"]
    assert [n["serialized"] for n in notes] == [[], ["(C7520) x"], []]
    assert seen == ["good", "bad", "good"]
    monkeypatch.undo()
    monkeypatch.setattr(px.shutil, "which", lambda name: None)
    assert px.ptxas_report("x") is None  # no ptxas: no note, no error


def test_compilecheck_prepare_names_every_cute_version_in_order_and_refuses_unknown_ones() -> None:
    """``tools/cute_compilecheck.py --prepare all`` (run 24: v1_cute-v3_cute failed on the H200 on a host error that
    only their sm80 split path reached) walks every CuTe version, v1_cute first; a misspelt name is one sentence."""
    _host()
    cc = importlib.import_module("kforge_kernels.mla.tools.cute_compilecheck")
    names = cc.version_names("all")
    assert sorted(names) == CUTE_VERSIONS and names[0] == "v1_cute"
    assert [int(n[1:].split("_")[0]) for n in names] == sorted(int(n[1:].split("_")[0]) for n in names)
    assert cc.version_names("v2_cute,v59_cute") == ["v2_cute", "v59_cute"]
    with pytest.raises(SystemExit, match="v99_cute"):
        cc.version_names("v1_cute,v99_cute")
    with pytest.raises(SystemExit, match="cute.host"):  # a module, not a version
        cc.version_names("cute.host")
    for argv in (["--prepare"], ["--prepare=all", "v1_cute"]):
        with pytest.raises(SystemExit, match="takes one argument"):
            cc.main(argv)
    assert cc.trial_params() == tuple(load_version("mla", "v0", kernels_dir=KDIR).spec.trials[t]
                                    for t in ("decode", "spec"))


def test_redo_flags_are_one_zeroed_set_per_device_and_stream() -> None:
    """The stale-max versions' redo flags live in their own cache (not the tail state's): one zeroed int32 set per
    (device, stream), grown but never shrunk, and ``reset_redo_flags`` zeroes every set."""
    host = _host()
    saved = dict(host._REDO_FLAGS)
    host._REDO_FLAGS.clear()
    try:
        a = host._redo_flags(10, "cpu", 0)
        assert a.numel() == 1024 and int(a.abs().sum()) == 0 and str(a.dtype) == "torch.int32"
        assert host._redo_flags(5, "cpu", 0) is a and host._redo_flags(5, "cpu", 7) is not a
        big = host._redo_flags(5000, "cpu", 0)
        assert big.numel() == 5000 and len(host.redo_flag_tensors()) == 2
        big[3] = 1
        host.reset_redo_flags()
        assert all(int(t.abs().sum()) == 0 for t in host.redo_flag_tensors())
        assert not any(k[0] == "redo_flags" for k in host._TAIL)
    finally:
        host._REDO_FLAGS.clear()
        host._REDO_FLAGS.update(saved)
