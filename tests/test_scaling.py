"""benchmarks/scaling.py: fixed cost against streaming cost from one trial at several parameter values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.scaling import fit_line, main, parse_vary

REPO = Path(__file__).resolve().parents[1]


def test_fit_recovers_a_line_and_reports_the_worst_residual() -> None:
    f = fit_line([2048, 4096, 8192], [200 + 0.1 * x for x in (2048, 4096, 8192)])
    assert f.fixed_us == pytest.approx(200) and f.slope_us == pytest.approx(0.1)
    assert f.max_residual_pct == pytest.approx(0, abs=1e-9)
    bent = fit_line([1, 2, 3], [10, 12, 18])  # not a line: the residual says so
    assert bent.max_residual_pct > 5
    with pytest.raises(ValueError, match="two or more distinct"):
        fit_line([4096, 4096], [1.0, 2.0])


@pytest.mark.parametrize("text, msg", [("t", "NAME=V1,V2"), ("t=2048", "two or more distinct"),
                                       ("t=2k,4k", "positive integers"), ("=1,2", "NAME=V1,V2")])
def test_vary_errors_say_what_to_write(text: str, msg: str) -> None:
    with pytest.raises(SystemExit, match=msg):
        parse_vary(text)
    assert parse_vary("t=4096, 2048,4096") == ("t", [2048, 4096])


def test_scaling_on_cpu_times_checks_and_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--kernel", "mla", "--versions", "v0", "--peers", "torch_bmm", "--trial", "decode",
               "--vary", "t=130,260,390", "--params", "b=2,h=16", "--device", "cpu", "--rounds", "3",
               "--warmup", "1", "--check-repeats", "1", "--kernels-dir", str(REPO / "kernels"),
               "--out", str(tmp_path / "s.md"), "--json", str(tmp_path / "s.json")])
    assert rc == 0
    table = (tmp_path / "s.md").read_text()
    assert table in capsys.readouterr().out
    rows = {ln.split("|")[1].strip(): ln for ln in table.splitlines() if ln.startswith("| ") and "---" not in ln}
    assert set(rows) == {"name", "v0", "torch_bmm"}
    assert "t=130 us" in rows["name"] and "fixed share at t=260" in rows["name"]
    data = json.loads((tmp_path / "s.json").read_text())
    for r in data["rows"]:
        assert r["fit"] is not None, r["why"]
        assert set(r["points"]) == {"130", "260", "390"}
        assert all(c["correct"] and c["median_us"] > 0 for c in r["points"].values())
        assert {p["params"]["t"] for p in data["meta"]["points"].values()} == {130, 260, 390}
    again = tmp_path / "again.md"  # re-rendered elsewhere from the JSON, unchanged
    assert main(["--from-json", str(tmp_path / "s.json"), "--out", str(again)]) == 0
    assert again.read_text() == table


def test_a_wrong_point_gets_no_fit_and_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import peers

    mod = peers.get_peer("torch_bmm").load()
    real = mod.run

    def wrong_at_long_t(q, kv_cache, block_table, cache_seqlens, *args, out, lse, config=None, **kw):  # type: ignore[no-untyped-def]
        real(q, kv_cache, block_table, cache_seqlens, *args, out=out, lse=lse, config=config, **kw)
        if int(cache_seqlens.max()) > 200:
            out.mul_(1.5)
        return out, lse

    monkeypatch.setattr(mod, "run", wrong_at_long_t)
    rc = main(["--peers", "torch_bmm", "--trial", "decode", "--vary", "t=70,260", "--params", "b=2,h=16",
               "--device", "cpu", "--rounds", "2", "--warmup", "0", "--check-repeats", "1",
               "--kernels-dir", str(REPO / "kernels"), "--json", str(tmp_path / "s.json")])
    assert rc == 1
    row = json.loads((tmp_path / "s.json").read_text())["rows"][0]
    assert row["fit"] is None and row["why"].startswith("no fit: t=260: ")


def test_the_varied_parameter_cannot_also_be_overridden(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--versions", "v0", "--vary", "t=70,140", "--params", "t=5", "--device", "cpu"])
    assert "--params sets t, which --vary varies" in capsys.readouterr().err


def test_vary_is_required_unless_re_rendering(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--versions", "v0", "--device", "cpu"])
    assert "--vary is required" in capsys.readouterr().err


def test_an_unavailable_peer_says_why_and_partial_points_are_kept(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.peers import get_peer

    why = get_peer("flashinfer_fa3").available()
    if why is None:
        pytest.skip("FlashInfer is importable here; this test needs a peer that cannot run")
    seen: list[int] = []
    real_write = __import__("pytest_kforge.fsutil", fromlist=["atomic_write_text"]).atomic_write_text

    def spy(path, text):  # type: ignore[no-untyped-def]
        if str(path).endswith(".partial"):
            seen.append(len(json.loads(text)["rows"][0]["points"]))
        return real_write(path, text)

    monkeypatch.setattr("pytest_kforge.fsutil.atomic_write_text", spy)
    rc = main(["--peers", "flashinfer_fa3,torch_bmm", "--trial", "decode", "--vary", "t=70,140", "--params",
               "b=2,h=16", "--device", "cpu", "--rounds", "2", "--warmup", "0", "--check-repeats", "1",
               "--kernels-dir", str(REPO / "kernels"), "--json", str(tmp_path / "s.json"),
               "--out", str(tmp_path / "s.md")])
    assert rc == 0
    rows = {r["name"]: r for r in json.loads((tmp_path / "s.json").read_text())["rows"]}
    assert rows["flashinfer_fa3"]["why"] == f"no fit: t=70: skipped: {why}; t=140: skipped: {why}"
    assert rows["torch_bmm"]["fit"] is not None
    assert seen == [1, 2] and not (tmp_path / "s.json.partial").exists()  # kept after each value, then replaced
    assert "n/a (2 points)" in (tmp_path / "s.md").read_text()
