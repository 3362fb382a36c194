"""The root conftest loads the same plugins as the installed entry points (an uninstalled checkout, e.g. the GPU
machine's copy, otherwise runs without the trust layer and rejects the xdist plugin's options)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")


def test_the_root_conftest_loads_every_pytest11_entry_point() -> None:
    spec = importlib.util.spec_from_file_location("kforge_root_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert sorted(mod.PLUGINS) == sorted(entry.values())


def test_without_the_entry_points_the_conftest_asks_for_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as md

    real = md.entry_points
    monkeypatch.setattr(md, "entry_points", lambda **kw: [] if kw.get("group") == "pytest11" else real(**kw))
    spec = importlib.util.spec_from_file_location("kforge_root_conftest_bare", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.pytest_plugins == mod.PLUGINS
    for name in mod.PLUGINS:  # each one importable, with hooks of its own
        plugin = importlib.import_module(name)
        assert any(k.startswith("pytest_") for k in vars(plugin)), name
