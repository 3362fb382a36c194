"""compare_outputs's element bound ``max_abs + rel_elem * |want|`` (run 14's false failure)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_kforge.spec import Tolerance, compare_outputs  # noqa: E402


def test_bf16_rounding_of_large_values_passes_with_rel_elem() -> None:
    # run 14: a page of 30.0 keys (the witness copied a spare block into a used slot) gave outputs
    # near 22.7, where a bf16 result is up to 0.0625 from the float32 reference
    want = torch.tensor([22.687, 0.5, -29.9], dtype=torch.float32)
    got = want.to(torch.bfloat16)
    assert not compare_outputs("out", got, want, Tolerance(max_abs=3e-2, rel_l2=1e-2)).ok
    res = compare_outputs("out", got, want, Tolerance(max_abs=3e-2, rel_l2=1e-2, rel_elem=2**-7))
    assert res.ok, res.message


def test_rel_elem_still_fails_a_wrong_element_and_names_it() -> None:
    want = torch.linspace(-3, 25, 64, dtype=torch.float32)
    got = want.to(torch.bfloat16).float()
    got[40] += 0.5  # four bf16 steps at ~14.8: wrong, and not the largest value
    res = compare_outputs("out", got, want, Tolerance(max_abs=3e-2, rel_l2=1.0, rel_elem=2**-7))
    assert not res.ok
    assert res.worst_index == (40,) and "nearest its bound: error 0.47" in res.message
    assert "0.03 + 0.0078125 * |want|" in res.message


def test_the_element_over_its_bound_is_named_not_the_largest_error() -> None:
    # element 0: the largest error (0.15) but within 0.03 + 2**-7 * 30; element 1: a smaller error
    # (0.05) over its bound (0.03 + 2**-7 * 1): the one named, and the kernel fails
    want = torch.tensor([30.0, 1.0, 2.0], dtype=torch.float64)
    got = want + torch.tensor([0.15, 0.05, 0.0], dtype=torch.float64)
    res = compare_outputs("out", got, want, Tolerance(max_abs=3e-2, rel_l2=1.0, rel_elem=2**-7))
    assert not res.ok and res.worst_index == (1,) and res.want == 1.0
    assert res.max_abs == pytest.approx(0.15)  # the field stays the largest error
    assert "max abs error 0.15; nearest its bound: error 0.05 at index (1,)" in res.message
    got[1] = want[1] + 0.03  # now every element is within its own bound
    assert compare_outputs("out", got, want, Tolerance(max_abs=3e-2, rel_l2=1.0, rel_elem=2**-7)).ok


def test_nan_fails_whatever_the_bound() -> None:
    want = torch.ones(4)
    got = want.clone()
    got[2] = float("nan")
    res = compare_outputs("out", got, want, Tolerance(max_abs=1.0, rel_l2=1.0, rel_elem=1.0))
    assert not res.ok and res.n_nonfinite == 1


def test_mla_out_is_right_for_a_page_of_large_keys() -> None:
    """The witness's mixed input: one used page overwritten with 30.0 everywhere; the reference
    output rounded to bf16 (what a correct kernel returns) must pass the MLA tolerance."""
    from pytest_kforge.registry import load_kernel

    spec = load_kernel("mla").spec
    params = {"b": 2, "s": 1, "t": 128, "h": 16}
    inputs = spec.make_inputs(params, seed=7)
    page = int(inputs["block_table"][1, 0])
    inputs["kv_cache"][page] = 30.0
    ref = spec.reference(inputs)
    assert float(ref["out"].abs().max()) > 16  # values where a bf16 step exceeds 2 * max_abs
    got = {"out": ref["out"].to(torch.bfloat16), "lse": ref["lse"]}
    for r in spec.compare(got, ref):
        assert r.ok, r.message
