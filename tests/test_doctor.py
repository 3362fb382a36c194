"""pytest_kforge.doctor: one line per check, and --dsl limits the toolchain checks to the DSLs a run needs."""

from __future__ import annotations

import pytest

from pytest_kforge import doctor


@pytest.fixture
def no_dsls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither DSL importable, no tileiras: what a CPU machine or a partly staged GPU machine has."""
    real = doctor._import
    monkeypatch.setattr(doctor, "_import", lambda mod: "ModuleNotFoundError" if mod != "torch" else real(mod))
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)


def test_only_the_named_dsls_toolchains_are_checked(no_dsls: None, capsys: pytest.CaptureFixture[str]) -> None:
    checks, _ok = doctor.run_checks(("cute-dsl",))
    by_name = {c.name: c for c in checks}
    assert by_name["CuTe DSL"].status == "FAIL"
    assert by_name["cuTile"].status == "ok" and "not checked" in by_name["cuTile"].detail
    assert "tileiras" not in by_name  # cuTile's compiler belongs to the DSL left out
    checks, _ok = doctor.run_checks()
    assert {c.name for c in checks} >= {"cuTile", "tileiras", "CuTe DSL"}
    assert all(c.status == "FAIL" for c in checks if c.name in ("cuTile", "tileiras", "CuTe DSL"))


def test_a_bad_dsl_name_is_refused_in_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main(["--dsl", "cute"]) == 2
    assert capsys.readouterr().out.strip() == "doctor: --dsl wants a comma list of cutile-dsl, cute-dsl; got cute"
    assert doctor.main(["--dsl"]) == 2


def test_the_cute_dsls_cuda_flavour_is_named_and_cu12_warned() -> None:
    """The plain install brings the cu12 build, whose PTX differs from the recorded cu13 build's (stop 45's CI)."""
    warn = doctor.cute_flavour_check((12, 9))
    assert warn.status == "warn" and "nvidia-cutlass-dsl[cu13]==4.8.1" in warn.detail
    assert doctor.cute_flavour_check((13, 4)) == doctor.Check("CuTe DSL flavour", "ok", "the cu13 build (CUDA 13.4)")
    assert doctor.cute_flavour_check(None).status == "warn"
