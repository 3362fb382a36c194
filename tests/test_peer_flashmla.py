"""benchmarks/peers/flashmla.py against a stand-in ``flash_mla`` module (CPU): the argument mapping,
the scheduling-metadata reuse rule, the copy into the harness's buffers, and one-line refusals.
The real kernel is checked on the GPU by tests/test_peers.py (skipped where FlashMLA is not built)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from benchmarks.peers import flashmla  # noqa: E402
from pytest_kforge.registry import load_kernel  # noqa: E402

SPEC = load_kernel("mla").spec


class _Sched:
    pass


def _fake_module(calls: list[dict[str, Any]]) -> types.ModuleType:
    mod = types.ModuleType("flash_mla")

    def get_mla_metadata(*_a: Any, **_k: Any) -> tuple[_Sched, None]:
        return _Sched(), None

    def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, sched, num_splits, *,
                               softmax_scale, causal):
        calls.append({"k_shape": tuple(k_cache.shape), "k_shares": k_cache.data_ptr(), "head_dim_v": head_dim_v,
                      "sched": sched, "num_splits": num_splits, "scale": softmax_scale, "causal": causal})
        ref = SPEC.reference({"q": q, "kv_cache": k_cache.view(k_cache.shape[0], 64, -1), "block_table": block_table,
                              "cache_seqlens": cache_seqlens, "softmax_scale": softmax_scale})
        return ref["out"].to(torch.bfloat16), ref["lse"]

    mod.get_mla_metadata = get_mla_metadata
    mod.flash_mla_with_kvcache = flash_mla_with_kvcache
    return mod


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "flash_mla", _fake_module(calls))
    monkeypatch.setattr(flashmla, "_check_device", lambda q: None)
    monkeypatch.setattr(flashmla, "_STATE", {})
    monkeypatch.setattr(flashmla, "_NOTES", {})
    return calls


@pytest.mark.parametrize("s", [1, 4])
def test_run_maps_our_contract_and_fills_our_buffers(fake: list[dict[str, Any]], s: int) -> None:
    params = {"b": 2, "s": s, "t": 130, "h": 16}
    inputs = SPEC.make_inputs(params, seed=5)
    outs = SPEC.alloc_outputs(params)
    outs["out"].fill_(float("nan"))
    outs["lse"].fill_(float("nan"))
    flashmla.prepare(**inputs)
    got = flashmla.run(**inputs, **outs)
    assert got[0] is outs["out"] and got[1] is outs["lse"]
    first, second = fake
    nb = inputs["kv_cache"].shape[0]
    assert first["k_shape"] == (nb, 64, 1, 576) and first["k_shares"] == inputs["kv_cache"].data_ptr()  # a view
    assert first["head_dim_v"] == 512 and first["num_splits"] is None and first["causal"] is (s > 1)
    assert first["scale"] == inputs["softmax_scale"] and second["sched"] is first["sched"]
    for r in SPEC.compare(outs, SPEC.reference(inputs)):
        assert r.ok, r.message
    assert "copied into the harness's buffers" in flashmla.notes()[f"out b=2 s={s}"]  # one note per shape


def test_new_or_modified_lengths_get_new_scheduling_metadata(fake: list[dict[str, Any]]) -> None:
    params = {"b": 2, "s": 1, "t": 130, "h": 16}
    inputs = SPEC.make_inputs(params, seed=6)
    outs = SPEC.alloc_outputs(params)
    flashmla.run(**inputs, **outs)
    flashmla.run(**inputs, **outs)
    inputs["cache_seqlens"][1] = 70  # in place: same object, same pointer, new version
    flashmla.run(**inputs, **outs)
    inputs["cache_seqlens"] = inputs["cache_seqlens"].clone()  # a new tensor with the same values
    flashmla.run(**inputs, **outs)
    scheds = [c["sched"] for c in fake]
    assert scheds[0] is scheds[1] and scheds[2] is not scheds[1] and scheds[3] is not scheds[2]


def test_host_tensors_are_refused_in_one_sentence() -> None:
    params = {"b": 1, "s": 1, "t": 64, "h": 16}
    inputs = SPEC.make_inputs(params, seed=1)
    outs = SPEC.alloc_outputs(params)
    with pytest.raises(ValueError, match="FlashMLA needs CUDA tensors") as err:
        flashmla.run(**inputs, **outs)
    assert "\n" not in str(err.value)
    assert "CUDA tensors only" in flashmla.supports(params, device="cpu")


def test_import_falls_back_to_the_built_tree(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "flash_mla"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("get_mla_metadata = flash_mla_with_kvcache = None\nBUILT_TREE = True\n")
    monkeypatch.delitem(sys.modules, "flash_mla", raising=False)
    monkeypatch.setenv("KFORGE_FLASHMLA_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert flashmla._import().BUILT_TREE is True
    monkeypatch.delitem(sys.modules, "flash_mla", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    monkeypatch.setenv("KFORGE_FLASHMLA_DIR", str(tmp_path / "missing"))
    with pytest.raises(ImportError):
        flashmla._import()
