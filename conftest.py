"""Root conftest: load the kforge plugin from a source checkout that was not pip-installed.

Installed (``pip install -e .``), the plugin comes through its ``pytest11`` entry point and this
file defines nothing: registering the plugin twice would be an error, and pytest refuses even an
empty ``pytest_plugins`` here when the generated suite (``pytest_kforge/collect.py``) is collected
from a run rooted elsewhere.
"""

from __future__ import annotations

import importlib.metadata

if not any(ep.name == "kforge" for ep in importlib.metadata.entry_points(group="pytest11")):
    pytest_plugins = ["pytest_kforge.plugin"]
