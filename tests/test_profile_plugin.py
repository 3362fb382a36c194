"""The --kforge-profile plugin: options in the kforge group, usage errors, CPU behaviour, planning."""

from __future__ import annotations

import importlib.metadata
import types

import pytest

from pytest_kforge.profile.plugin import plan
from test_plugin_helpers import write_tiny

# until the lead's pyproject adds the pytest11 entry point `kforge_profile`, load it by name
_REGISTERED = any(ep.name == "kforge_profile" for ep in importlib.metadata.entry_points(group="pytest11"))
P = [] if _REGISTERED else ["-p", "pytest_kforge.profile.plugin"]


def test_help_lists_profile_options(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest(*P, "--help").stdout.str()
    for opt in ("--kforge-profile", "--kforge-baseline=VERSION", "--kforge-ncu=PATH", "--kforge-ncu-timeout=SECONDS"):
        assert opt in out, opt
    # in the kforge group, after its heading
    assert out.index("--kforge-profile") > out.index("kforge: optimise a GPU kernel")


@pytest.mark.parametrize("args, message", [
    (["--kforge-profile"], "--kforge-profile needs --kernel NAME"),
    (["--kforge-baseline", "0"], "argument --kforge-baseline: expected a version like 'v3', got '0'"),
    (["--kforge-ncu-timeout", "-5"], "argument --kforge-ncu-timeout: expected a positive number of seconds"),
])
def test_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*P, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_cpu_run_says_why_nothing_was_profiled(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    result = pytester.runpytest(*P, "--kernel", "tiny:v0", "--trial", "small", "--kforge-no-bench",
                                "--kforge-device", "cpu", "--kforge-profile", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*kforge profile*", "kforge profile: skipped: no CUDA GPU in this run*"])


def test_plan_skips_versions_that_failed_correctness() -> None:
    v = lambda n: types.SimpleNamespace(name=n)  # noqa: E731
    t = types.SimpleNamespace(name="decode", params={"b": 1})
    ks = types.SimpleNamespace(
        selection=types.SimpleNamespace(kernel=types.SimpleNamespace(name="mla"), versions=[v("v0"), v("v1")],
                                        trials=[t]),
        correctness=[{"version": "v1", "passed": False}, {"version": "v0", "passed": True}])
    todo, lines = plan(ks)
    assert todo == [("v0", ["decode"])]
    assert lines == ["kforge profile mla v1: not profiled: it failed correctness; fix that first"]
