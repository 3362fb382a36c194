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
