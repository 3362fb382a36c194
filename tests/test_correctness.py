"""Correctness checks outside pytester: the shipped v0s on CPU and the contract checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kforge.correctness import check_version, ref_dtype_for
from pytest_kforge.registry import Registry

from test_plugin_helpers import write_tiny

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def test_mla_v0_small_shapes_with_ragged_lengths() -> None:
    v0 = Registry(KERNELS).kernel("mla").version("v0")
    params = {"b": 3, "s": 4, "t": 150, "h": 16}
    rep = check_version(v0, params, seed=11, device="cpu", input_kwargs={"seqlens": [150, 37, 65]})
    assert rep.ok, rep.message
    assert rep.ref_dtype == "torch.float64" and rep.seeds == (11, 12)


def test_launcher_runs_the_version_into_poisoned_outputs_it_then_fills() -> None:
    torch = pytest.importorskip("torch")
    v0 = Registry(KERNELS).kernel("softmax").version("v0")
    launch = v0.launcher({"rows": 7, "cols": 333}, seed=3, device="cpu")
    (out,) = launch()
    assert out.shape == (7, 333) and bool(torch.isfinite(out).all())
    assert torch.allclose(out.sum(dim=-1), torch.ones(7, dtype=out.dtype), atol=1e-3)


def test_softmax_v0() -> None:
    v0 = Registry(KERNELS).kernel("softmax").version("v0")
    rep = check_version(v0, {"rows": 7, "cols": 333}, seed=3, device="cpu")
    assert rep.ok, rep.message


@pytest.mark.parametrize(("version", "needle"), [
    ("v1_nowrite", "elements are NaN/Inf"),
    ("v2_fresh", "not the output buffer passed in"),
    ("v3_mutate", "modified its input 'x'"),
    ("v4_cache", "outputs look cached across calls"),
    ("v5_wrong", "max abs error 0.01"),
])
def test_contract_violations(tmp_path: Path, version: str, needle: str) -> None:
    write_tiny(tmp_path, (version,))
    kernel = Registry(tmp_path / "kernels").kernel("tiny")
    assert check_version(kernel.version("v0"), {"n": 100}, seed=1, device="cpu").ok
    rep = check_version(kernel.version(version), {"n": 100}, seed=1, device="cpu")
    assert not rep.ok and needle in rep.message


def test_reference_dtype_by_size() -> None:
    import torch

    v0 = Registry(KERNELS).kernel("mla").version("v0")
    assert ref_dtype_for(v0, {"b": 1, "s": 1, "t": 64, "h": 16}) is torch.float64
    assert ref_dtype_for(v0, {"b": 32, "s": 1, "t": 4096, "h": 128}) is torch.float32


def test_changed_version_file_is_reimported(tmp_path: Path) -> None:
    import os

    write_tiny(tmp_path, ("v5_wrong",))
    kernel = Registry(tmp_path / "kernels").kernel("tiny")
    assert not check_version(kernel.version("v5_wrong"), {"n": 50}, seed=1, device="cpu").ok
    path = tmp_path / "kernels" / "tiny" / "v5_wrong.py"
    path.write_text(path.read_text().replace("x * 2 + 1.01", "x * 2 + 1"))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a later mtime, however coarse the clock
    assert check_version(kernel.version("v5_wrong"), {"n": 50}, seed=1, device="cpu").ok


def _section_probe(monkeypatch, module, spec):
    """Patch ``module.gpu_section`` with a flag and ``spec.make_inputs`` with a recorder of (device, in section)."""
    import contextlib

    state = {"in": False}
    calls = []

    @contextlib.contextmanager
    def section(*a, **k):
        state["in"] = True
        try:
            yield
        finally:
            state["in"] = False

    original = spec.make_inputs

    def recording(params, *, seed, device="cpu", **kw):
        calls.append((str(device), state["in"]))
        return original(params, seed=seed, device=device, **kw)

    monkeypatch.setattr(module, "gpu_section", section)
    monkeypatch.setattr(spec, "make_inputs", recording)
    return calls


def test_inputs_are_made_on_the_host_before_the_gpu_section(monkeypatch) -> None:
    """Random generation at a trial's size takes seconds of CPU (1-2 s for MLA here): outside a shared
    GPU's lock, only the copy inside it (run 26)."""
    from pytest_kforge import correctness

    v0 = Registry(KERNELS).kernel("mla").version("v0")
    calls = _section_probe(monkeypatch, correctness, v0.spec)
    rep = check_version(v0, {"b": 2, "s": 2, "t": 70, "h": 16}, seed=5, device="cpu",
                        input_kwargs={"seqlens": [70, 9]})
    assert rep.ok, rep.message
    assert calls == [("cpu", False), ("cpu", False)]


def test_a_trial_makes_its_inputs_and_the_recheck_inputs_before_the_gpu_section(monkeypatch) -> None:
    from pytest_kforge import bench
    from pytest_kforge.spec import TrialConfig
    from pytest_kforge.trialinputs import TrialInputs

    v0 = Registry(KERNELS).kernel("softmax").version("v0")
    calls = _section_probe(monkeypatch, bench, v0.spec)
    got = []
    monkeypatch.setattr(bench, "_run_trial", lambda version, trial, ks, source, host: got.append(host) or ({}, None))
    trial = TrialConfig(name="t", params={"rows": 4, "cols": 64})

    class KS:
        inputs = TrialInputs(v0.spec, seed=3, device="cpu")

    ks = KS()
    bench.run_trial(v0, trial, ks)
    ks.inputs.prepare(v0, trial, got[0])  # the section's build, from the host draw (no new values drawn)
    bench.run_trial(v0, trial, ks)  # a later version in the same process: only the re-check's inputs are new
    assert calls == [("cpu", False)] * 3
    assert got[0].trial is not None and got[1].trial is None and got[0].fresh["x"].shape == (4, 64)
    assert got[0].for_params({"rows": 4, "cols": 64}) is got[0]
    assert got[0].for_params({"rows": 2, "cols": 64}) is None  # shrunk for memory: the section makes its own
