"""Peers (benchmarks/peers) and the side-by-side comparison (benchmarks/compare.py)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from benchmarks.compare import main  # noqa: E402
from benchmarks.peers import PEERS, PeerVersion, get_peer  # noqa: E402
from pytest_kforge.correctness import check_version  # noqa: E402
from pytest_kforge.registry import load_kernel  # noqa: E402
from pytest_kforge.spec import poison_  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MLA = load_kernel("mla", REPO / "kernels")


@pytest.mark.parametrize("name", sorted(n for n, p in PEERS.items() if p.kernel == "mla"))
def test_peer_follows_the_version_contract(name: str) -> None:
    mod = get_peer(name).load()
    sig = inspect.signature(mod.run)
    assert list(sig.parameters)[:5] == list(MLA.spec.input_names)
    kw_only = {n for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {"out", "lse", "config"} <= kw_only
    reason = get_peer(name).available()
    assert reason is None or (isinstance(reason, str) and reason and "\n" not in reason)


def test_flashinfer_skips_with_a_reason_without_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: availability depends on flashinfer being installed")
    for name in ("flashinfer_fa3", "flashinfer_fa2"):
        reason = get_peer(name).available()
        assert reason is not None and "CUDA" in reason


def test_unknown_peer_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="torch_bmm"):
        get_peer("flash_decoding_v9")


@pytest.mark.parametrize(("backend", "params", "device", "expect"), [
    ("fa3", {"b": 32, "s": 16, "t": 4096, "h": 128}, "cuda", None),
    ("fa3", {"b": 4, "s": 1, "t": 1000, "h": 16}, "cuda", None),
    ("fa2", {"b": 32, "s": 1, "t": 4096, "h": 128}, "cuda", None),
    ("fa2", {"b": 32, "s": 16, "t": 4096, "h": 128}, "cuda", "wrong lse for causal s>1"),
    ("fa2", {"b": 2, "s": 2, "t": 130, "h": 16}, "cuda", "wrong lse for causal s>1"),
    ("fa3", {"b": 2, "s": 1, "t": 130, "h": 16}, "cpu", "CUDA tensors only"),
])
def test_flashinfer_supports_names_what_it_cannot_compute(backend: str, params: dict[str, int], device: str,
                                                          expect: str | None) -> None:
    shim = PeerVersion(get_peer(f"flashinfer_{backend}"), MLA.spec, device)
    why = shim.supports(params)
    if expect is None:
        assert why is None
    else:
        assert why is not None and expect in why and "\n" not in why


def test_flashinfer_refuses_host_tensors_with_one_sentence() -> None:
    params = {"b": 2, "s": 1, "t": 70, "h": 16}
    inputs = MLA.spec.make_inputs(params, seed=1)
    outs = MLA.spec.alloc_outputs(params)
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        get_peer("flashinfer_fa3").run(**inputs, **outs)


@pytest.mark.parametrize(("name", "s"), [("torch_bmm", 1), ("torch_bmm", 5), ("torch_bmm_contig", 5)])
def test_torch_bmm_matches_the_reference_on_cpu(name: str, s: int) -> None:
    """The harness's own check: poisoned outputs, unmodified inputs, fresh inputs reusing outputs."""
    params = {"b": 3, "s": s, "t": 150, "h": 16}
    shim = PeerVersion(get_peer(name), MLA.spec)
    report = check_version(shim, params, seed=7, device="cpu",  # type: ignore[arg-type]
                           input_kwargs={"seqlens": [150, s + 2, 67]})
    assert report.ok, report.message


def test_torch_bmm_contig_never_serves_a_stale_gather() -> None:
    params = {"b": 2, "s": 2, "t": 100, "h": 16}
    peer = get_peer("torch_bmm_contig")
    inputs = MLA.spec.make_inputs(params, seed=3)
    outs = MLA.spec.alloc_outputs(params)
    peer.prepare(**inputs)
    peer.run(**inputs, **outs)
    inputs["kv_cache"].mul_(-1.0)  # same tensor object, modified in place
    poison_(outs)
    peer.run(**inputs, **outs)
    ref = MLA.spec.reference(inputs, dtype=torch.float64)
    assert all(r.ok for r in MLA.spec.compare(outs, ref))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["flashinfer_fa3", "flashinfer_fa2", "flashmla", "torch_bmm"])
@pytest.mark.parametrize("s", [1, 16])
def test_peer_matches_the_reference_on_gpu(name: str, s: int) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")
    reason = get_peer(name).available()
    if reason:
        pytest.skip(reason)
    params = {"b": 4, "s": s, "t": 1000, "h": 128}
    shim = PeerVersion(get_peer(name), MLA.spec, "cuda")
    why = shim.supports(params)
    if why:
        pytest.skip(why)
    report = check_version(shim, params, seed=11, device="cuda",  # type: ignore[arg-type]
                           input_kwargs={"seqlens": [1000, 333, s + 1, 777]})
    assert report.ok, report.message


def test_compare_on_cpu_writes_table_json_and_devlog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    devlog = tmp_path / "mla.md"
    devlog.write_text("# MLA\n\nkept text\n")
    rc = main(["--kernel", "mla", "--versions", "v0", "--peers", "torch_bmm,flashinfer_fa3", "--trial", "decode,spec",
               "--params", "b=2,t=130,h=16", "--device", "cpu", "--rounds", "3", "--warmup", "1",
               "--check-repeats", "1", "--kernels-dir", str(REPO / "kernels"), "--out", str(tmp_path / "t.md"),
               "--json", str(tmp_path / "t.json"), "--devlog", str(devlog)])
    assert rc == 0
    table = (tmp_path / "t.md").read_text()
    assert table in capsys.readouterr().out
    lines = {ln.split("|")[1].strip(): ln for ln in table.splitlines() if ln.startswith("| ") and "---" not in ln}
    assert set(lines) == {"name", "v0", "torch_bmm", "flashinfer_fa3"}
    assert lines["torch_bmm"].rstrip().endswith("| yes |") and lines["v0"].rstrip().endswith("| yes |")
    if not torch.cuda.is_available():
        assert "skipped:" in lines["flashinfer_fa3"]
    else:  # a GPU is present but this run's tensors are on the CPU: never handed to FlashInfer
        assert "decode: unsupported: FlashInfer runs on CUDA tensors only" in lines["flashinfer_fa3"]
    data = json.loads((tmp_path / "t.json").read_text())
    bmm = next(r for r in data["rows"] if r["name"] == "torch_bmm")
    assert set(bmm["cells"]) == {"decode", "spec"}
    for cell in bmm["cells"].values():
        assert cell["correct"] is True and cell["median_us"] > 0 and cell["rounds"] == 3
        assert cell["tflops"] == pytest.approx(data["meta"]["trials"][cell["trial"]]["flops"]
                                               / cell["median_us"] / 1e6)
        assert cell["host_us"] > 0 and cell["host_b2b_us"] > 0  # one timed round's call, and back to back
    assert "host us, back to back / one timed round (decode; spec)" in lines["name"]
    host = lines["torch_bmm"].split("|")[-3].strip()  # "<b2b> / <timed>; <b2b> / <timed>": a pair per trial
    assert host.count(";") == 1 and all(part.count(" / ") == 1 for part in host.split("; "))
    text = devlog.read_text()
    assert "kept text" in text and "<!-- kforge:peers:start -->" in text and "| torch_bmm | peer |" in text
    # the table measured elsewhere (the GPU machine) is re-rendered here from its JSON, unchanged
    again = tmp_path / "again.md"
    assert main(["--from-json", str(tmp_path / "t.json"), "--out", str(again)]) == 0
    assert again.read_text() == table


def test_compare_reports_a_wrong_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import peers

    mod = peers.get_peer("torch_bmm").load()
    real = mod.run

    def wrong(*args, out, lse, config=None, **kw):  # type: ignore[no-untyped-def]
        real(*args, out=out, lse=lse, config=config, **kw)
        out.mul_(1.5)
        return out, lse

    monkeypatch.setattr(mod, "run", wrong)
    rc = main(["--peers", "torch_bmm", "--trial", "decode", "--params", "b=2,t=70,h=16", "--device", "cpu",
               "--rounds", "2", "--warmup", "0", "--check-repeats", "1", "--kernels-dir", str(REPO / "kernels"),
               "--out", str(tmp_path / "t.md")])
    assert rc == 1
    assert "| NO (decode: " in (tmp_path / "t.md").read_text()


def test_compare_reports_an_unsupported_cell_without_checking_or_timing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import peers

    mod = peers.get_peer("torch_bmm").load()
    seen: list[tuple[dict[str, int], str]] = []

    def supports(params, *, device="cuda", config=None):  # type: ignore[no-untyped-def]
        seen.append((dict(params), device))
        return "no drafts here" if params["s"] > 1 else None

    monkeypatch.setattr(mod, "supports", supports, raising=False)
    rc = main(["--peers", "torch_bmm", "--trial", "decode,spec", "--params", "b=2,t=70,h=16", "--device", "cpu",
               "--rounds", "2", "--warmup", "0", "--check-repeats", "1", "--kernels-dir", str(REPO / "kernels"),
               "--out", str(tmp_path / "t.md"), "--json", str(tmp_path / "t.json")])
    assert rc == 0
    assert [d for _p, d in seen] == ["cpu", "cpu"] and [p["s"] for p, _d in seen] == [1, 16]
    assert "| yes (spec: unsupported: no drafts here) |" in (tmp_path / "t.md").read_text()
    cells = json.loads((tmp_path / "t.json").read_text())["rows"][0]["cells"]
    assert cells["decode"]["correct"] is True and cells["decode"]["median_us"] > 0
    assert cells["spec"]["correct"] is None and cells["spec"]["median_us"] is None


def test_compare_skips_a_dsl_version_on_a_cpu_device_with_one_sentence(tmp_path: Path) -> None:
    # a CuTe version whose toolchain imports fine on a CPU machine used to end the whole run in host.py's traceback
    pytest.importorskip("cutlass")
    rc = main(["--versions", "v59_cute,v0", "--trial", "decode", "--params", "b=2,t=70,h=16", "--device", "cpu",
               "--rounds", "2", "--warmup", "0", "--check-repeats", "1", "--kernels-dir", str(REPO / "kernels"),
               "--out", str(tmp_path / "t.md")])
    assert rc == 0
    rows = {ln.split("|")[1].strip(): ln for ln in (tmp_path / "t.md").read_text().splitlines() if ln.startswith("| ")}
    assert "skipped: mla v59_cute (cute-dsl) needs a CUDA GPU" in rows["v59_cute"]
    assert rows["v0"].rstrip().endswith("| yes |")


@pytest.mark.parametrize("name", sorted(n for n, p in PEERS.items() if p.kernel == "rmsnorm_fp8"))
def test_rmsnorm_peer_follows_its_kernels_contract(name: str) -> None:
    """A peer of another kernel takes that kernel's inputs and outputs (and eager torch is correct on CPU)."""
    spec = load_kernel("rmsnorm_fp8", REPO / "kernels").spec
    sig = inspect.signature(get_peer(name).load().run)
    assert list(sig.parameters)[:3] == list(spec.input_names)
    kw_only = {n for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {"q", "scale", "config"} <= kw_only
    if get_peer(name).config.get("mode") == "eager":
        params = {"t": 5, "d": 384}
        inputs = spec.make_inputs(params, seed=3)
        outputs = spec.alloc_outputs(params)
        poison_(outputs)
        get_peer(name).run(**inputs, **outputs)
        assert all(r.ok for r in spec.compare(outputs, spec.reference(inputs))), "eager peer is wrong on CPU"


def test_compare_of_another_kernel_states_its_floors_and_no_mla_note(tmp_path: Path) -> None:
    """The table names the roofline its floors came from, and MLA's torch_bmm note appears only beside torch_bmm."""
    rc = main(["--kernel", "rmsnorm_fp8", "--versions", "v0", "--peers", "torch_eager", "--trial", "decode",
               "--params", "t=4,d=256", "--device", "cpu", "--rounds", "2", "--warmup", "1", "--check-repeats", "1",
               "--kernels-dir", str(REPO / "kernels"), "--out", str(tmp_path / "t.md"), "--json", str(tmp_path / "t.json")])
    assert rc == 0
    table = (tmp_path / "t.md").read_text()
    assert "- floors from the roofline 4.3 TB/s" in table and "torch_bmm" not in table
    meta = json.loads((tmp_path / "t.json").read_text())["meta"]
    assert meta["roofline"].startswith("roofline 4.3 TB/s")
