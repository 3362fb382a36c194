"""Fixtures shared by several test modules; none is autouse, so each applies only where a module asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def isolated_kernels() -> Iterator[None]:
    """Restore ``kforge_kernels.*`` and the registry's caches after a test that loads a temporary kernels folder.

    Use it for a whole module with ``pytestmark = pytest.mark.usefixtures("isolated_kernels")``.
    """
    from kforge_fakes import isolated_kernel_modules

    with isolated_kernel_modules():
        yield


@pytest.fixture
def standalone_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make pytester's in-process runs standalone sessions when this suite itself runs under xdist.

    They would otherwise inherit the worker's ``PYTEST_XDIST_*`` environment, and pytest-benchmark
    (and kforge's own xdist checks) would treat them as xdist workers: benchmarks off, no JSON.
    """
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
