"""pytest11 plugin ``kforge_trust``: static checks at collection, run-time guards on correctness calls.

``--kforge-trust strict|warn|off`` (default strict):

* at collection, every selected non-torch version (and the sibling helpers it imports) is read by
  :mod:`pytest_kforge.trust.static`; in ``strict`` mode each of that version's tests fails in
  setup with the findings (one line each), in ``warn`` mode they are printed in the summary;
* during that version's correctness and fuzz tests (never its timed trials, so timing is not
  disturbed), its ``run`` is wrapped: non-torch versions run under
  :func:`~pytest_kforge.trust.runtime.forbid_reference`, and every version's return value must
  be the very output tensors passed in (:func:`~pytest_kforge.trust.runtime.check_returned`:
  refuses lazy proxies and tensor subclasses).

Legitimate uses are allowed by the project through the ini option ``kforge_trust_allow``
(lines ``rule``, ``rule:target`` or ``file-glob::rule:target``; see :mod:`.static`).  The plugin
reads the harness's selection from ``pytest_kforge.plugin.SESSION_KEY`` and does nothing
without ``--kernel``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest

__all__ = ["TRUST_KEY", "TrustState"]


class TrustState:
    """Per-run state: the mode, findings per version, and the wrapped ``run`` functions."""

    def __init__(self, mode: str, allow: list[str]) -> None:
        self.mode = mode
        self.allow = allow
        self.findings: dict[str, list[Any]] = {}
        self.active: str | None = None  # version whose correctness test is running
        self.restore: list[tuple[Any, Any]] = []


TRUST_KEY = pytest.StashKey[TrustState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kforge")
    g.addoption("--kforge-trust", choices=("strict", "warn", "off"), default="strict",
                help="cheat checks of non-torch versions: strict fails their tests, warn prints, off skips "
                     "(default strict)")
    parser.addini("kforge_trust_allow", type="linelist", default=[],
                  help="allowed static findings: rule, rule:target or file-glob::rule:target (fnmatch)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TRUST_KEY] = TrustState(config.getoption("kforge_trust", "strict") or "strict",
                                         list(config.getini("kforge_trust_allow") or []))


def _selection(config: pytest.Config) -> Any:
    try:
        from ..session import SESSION_KEY
    except ImportError:  # pragma: no cover - the harness core is not installed
        return None
    ks = config.stash.get(SESSION_KEY, None)
    return getattr(ks, "selection", None)


def _case_version(item: pytest.Item) -> tuple[str | None, str]:
    """(version name, test kind) of a harness-generated item, else (None, "")."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("kforge_case") if callspec else None
    version = getattr(case[0], "name", None) if isinstance(case, tuple) and case else None
    kind = getattr(item, "originalname", "").removeprefix("test_")
    return version, kind


def _wrap(state: TrustState, version: Any) -> None:
    """Guard ``version.module.run`` while one of its correctness tests is active."""
    from .runtime import check_returned, forbid_reference

    mod = version.module
    inner = mod.run
    if getattr(inner, "__kforge_trust_wrapped__", False):
        return
    names = list(version.spec.output_names)
    try:
        sig = inspect.signature(inner)
    except (TypeError, ValueError):  # pragma: no cover
        sig = None

    @functools.wraps(inner)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if state.active != version.name:
            return inner(*args, **kwargs)
        if version.language == "torch":
            returned = inner(*args, **kwargs)
        else:
            with forbid_reference(version.spec, version=f"{version.kernel} {version.name}"):
                returned = inner(*args, **kwargs)
        bound = dict(sig.bind_partial(*args, **kwargs).arguments) if sig else dict(kwargs)
        outputs = {n: bound[n] for n in names if n in bound}
        inputs = {k: v for k, v in bound.items() if k not in outputs and k != "config"}
        if len(outputs) == len(names):
            problems = check_returned(returned, outputs, inputs, names, f"{version.kernel} {version.name}")
            if problems:
                pytest.fail("; ".join(problems), pytrace=False)
        return returned

    guarded.__kforge_trust_wrapped__ = True  # type: ignore[attr-defined]
    mod.run = guarded
    state.restore.append((mod, inner))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(TRUST_KEY, None)
    sel = _selection(config)
    if state is None or state.mode == "off" or sel is None:
        return
    from .static import check_version

    for v in sel.versions:
        if v.language != "torch":
            state.findings[v.name] = check_version(v, allow=state.allow)
        _wrap(state, v)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.config.stash.get(TRUST_KEY, None)
    if state is None or state.mode == "off":
        return
    version, _ = _case_version(item)
    found = state.findings.get(version or "", [])
    if found and state.mode == "strict":
        lines = "\n".join(f"  {f}" for f in found)
        pytest.fail(f"kforge-trust: {version} failed the static cheat check ({len(found)} finding"
                    f"{'s' if len(found) != 1 else ''}):\n{lines}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    state = item.config.stash.get(TRUST_KEY, None)
    version, kind = _case_version(item)
    if state is None or state.mode == "off" or kind not in ("correctness", "fuzz"):
        return (yield)
    state.active = version
    try:
        return (yield)
    finally:
        state.active = None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(TRUST_KEY, None)
    if state is None or not any(state.findings.values()):
        return
    terminalreporter.section("kforge-trust static findings")
    for version, found in state.findings.items():
        for f in found:
            terminalreporter.write_line(f"{version}: {f}")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(TRUST_KEY, None)
    for mod, inner in reversed(state.restore if state else []):
        mod.run = inner
