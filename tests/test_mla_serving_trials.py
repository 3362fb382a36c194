"""MLA's serving-shape trials (issue 35): ragged lengths fixed per shape, counted in the floor, correct on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kforge.correctness import check_version
from pytest_kforge.registry import load_kernel

ROOT = Path(__file__).resolve().parents[1]
MLA = load_kernel("mla", ROOT / "kernels")
SERVE = sorted(n for n in MLA.spec.trials if n.startswith("serve_"))


def _params(name: str) -> dict[str, int]:
    return dict(MLA.spec.trial(name).params)


def test_serving_trials_cover_the_shapes_engines_send() -> None:
    """Every tensor-parallel head count, batch 1 and 256, s from 1 to 16; the defaults stay decode and spec."""
    ps = [_params(n) for n in SERVE]
    assert {p["h"] for p in ps} == {16, 32, 64, 128} and {1, 256} <= {p["b"] for p in ps}
    assert {1, 4, 16} <= {p["s"] for p in ps} and tuple(MLA.spec.default_trials) == ("decode", "spec")


@pytest.mark.parametrize("name", [n for n in SERVE if _params(n).get("ragged")])
def test_ragged_lengths_are_fixed_unaligned_and_counted(name: str) -> None:
    from kforge_kernels.mla.spec import PAGE, seq_lengths

    p = _params(name)
    lens = seq_lengths(p)
    assert lens == seq_lengths(dict(p)) and len(lens) == p["b"] and min(lens) >= p["s"]
    assert len(set(lens)) > p["b"] // 2 and not any(n % PAGE == 0 for n in lens)
    assert 0.8 < sum(lens) / (p["b"] * p["t"]) < 1.2
    # the floor counts the lengths the inputs have, not b * t
    assert MLA.spec.flops(p) == MLA.spec.flops(p, seqlens=lens) != MLA.spec.flops({**p, "ragged": 0})
    inputs = MLA.spec.make_inputs(MLA.spec.small_params(p), seed=1)
    assert inputs["cache_seqlens"].tolist() == seq_lengths(MLA.spec.small_params(p))


@pytest.mark.parametrize("name", ["serve_tp8", "serve_mtp4"])
def test_reference_version_is_correct_on_a_small_serving_shape(name: str) -> None:
    report = check_version(MLA.version("v0"), MLA.spec.small_params(_params(name)), seed=7, device="cpu", repeats=1)
    assert report.ok, report.message
