"""The kforge_trust pytest plugin: --kforge-trust strict|warn|off and the kforge_trust_allow ini option."""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - imported before pytester snapshots sys.modules: torch cannot be imported twice

CHEAT = Path(__file__).resolve().parent / "adversarial" / "kernels" / "cheat"


def _plugins() -> list[str]:
    eps = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    core = "pytest_kforge.plugin" in eps or "pytest_kforge.plugin" in sys.modules
    return ([] if core else ["-p", "pytest_kforge.plugin"]) + (
        [] if "pytest_kforge.trust.plugin" in eps else ["-p", "pytest_kforge.trust.plugin"])


@pytest.fixture()
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    dst = pytester.path / "kernels" / "cheat"
    dst.mkdir(parents=True)
    for name in ("spec.py", "v0.py", "v4_reference.py"):
        shutil.copy(CHEAT / name, dst / name)
    pytester.makefile(".toml", pyproject='[tool.kforge]\nkernels_dir = "kernels"\n')
    return pytester


def run(p: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return p.runpytest_inprocess(*_plugins(), "--noconftest", "-p", "no:cacheprovider", "--kernel", "cheat",
                                 "--kernel-version", "v0,v4_reference", "--kforge-device", "cpu", "--kforge-no-bench",
                                 "-rA", *extra)


def test_strict_fails_the_dsl_cheat_with_findings(project):
    res = run(project)
    res.stdout.fnmatch_lines(["*kforge-trust: v4_reference failed the static cheat check*",
                              "*v4_reference.py:*[reference]*", "*PASSED*test_correctness[[]cheat-v0-*"])
    outcomes = res.parseoutcomes()
    assert outcomes.get("errors", 0) >= 1 and outcomes.get("passed", 0) >= 1


def test_warn_reports_but_does_not_fail(project):
    res = run(project, "--kforge-trust", "warn")
    res.stdout.fnmatch_lines(["*kforge-trust static findings*", "v4_reference: *[[]reference[]]*"])
    assert "errors" not in res.parseoutcomes() and "failed" not in res.parseoutcomes()


def test_off_does_nothing(project):
    res = run(project, "--kforge-trust", "off")
    assert "kforge-trust" not in res.stdout.str()
    assert "errors" not in res.parseoutcomes()


def test_allow_list_from_ini(project):
    project.makeini("[pytest]\nkforge_trust_allow =\n    v4_*.py::reference\n")
    res = run(project)
    assert "failed the static cheat check" not in res.stdout.str()
    assert "errors" not in res.parseoutcomes()


def test_bad_mode_is_a_usage_error(project):
    res = run(project, "--kforge-trust", "lenient")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--kforge-trust*invalid choice*"])
