"""Fixtures shared by several test modules; none is autouse, so each applies only where a module asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def isolated_kernels() -> Iterator[None]:
    """Restore ``kforge_kernels.*`` and the registry's caches after a test that loads a temporary kernels folder.

    Use it for a whole module with ``pytestmark = pytest.mark.usefixtures("isolated_kernels")``.
    """
    from pytest_kforge.orchestrate.fakes import isolated_kernel_modules

    with isolated_kernel_modules():
        yield
