"""Hooks pytest-kforge calls, for other plugins and conftest.py files to implement.

Registered through ``pytest_addhooks``; implement them in a ``conftest.py`` or a plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version
    from .session import KforgeSession
    from .spec import TrialConfig


@pytest.hookspec()
def pytest_kforge_select_trials(config: pytest.Config, kernel: str, trials: list[TrialConfig]) -> None:
    """Change the trial configs of the run in place (called once, after ``--trial`` is resolved).

    Example (a conftest.py that adds a long-context config)::

        from pytest_kforge.spec import TrialConfig

        def pytest_kforge_select_trials(config, kernel, trials):
            if kernel == "mla":
                trials.append(TrialConfig("long", {"b": 8, "s": 1, "t": 16384, "h": 128}))
    """


@pytest.hookspec()
def pytest_kforge_trial_result(config: pytest.Config, version: Version, trial: TrialConfig,
                               result: dict[str, Any]) -> None:
    """Called with each trial's results-JSON row before it is stored; may add keys to ``result``.

    Example (attach a profile path produced by another plugin)::

        def pytest_kforge_trial_result(config, version, trial, result):
            result["profile"] = f"reports/{version.name}-{trial.id}.ncu-rep"
    """


@pytest.hookspec()
def pytest_kforge_correctness_result(config: pytest.Config, version: str, nodeid: str, passed: bool,
                                     message: str) -> None:
    """Called after each correctness / fuzz test with its outcome.

    Example (stop the run at the first wrong version)::

        def pytest_kforge_correctness_result(config, version, nodeid, passed, message):
            if not passed:
                config.stash.setdefault("first_wrong", version)
    """


@pytest.hookspec()
def pytest_kforge_write_json(config: pytest.Config, session: KforgeSession, payload: dict[str, Any]) -> None:
    """Called with the results-JSON payload just before ``--kforge-json`` is written; may modify it.

    Example (an xdist helper merging the workers' rows)::

        def pytest_kforge_write_json(config, session, payload):
            payload["results"].extend(collected_from_workers)
    """
