"""Root conftest: load the kforge plugin from a source checkout that was not pip-installed.

Installed (``pip install -e .``), the plugin comes through its ``pytest11`` entry point and this
file defines nothing: registering the plugin twice would be an error, and pytest refuses even an
empty ``pytest_plugins`` here when the generated suite (``pytest_kforge/collect.py``) is collected
from a run rooted elsewhere.
"""

from __future__ import annotations

import importlib.metadata

#: every ``pytest11`` entry point of pyproject.toml (tests/test_conftest_plugins.py keeps the two lists equal): the
#: profile, trust and xdist plugins register their own options and hooks, so a checkout that loaded only the main
#: plugin ran without the trust layer and rejected ``--kforge-workers-per-gpu`` (run 31 on the GPU machine)
PLUGINS = ["pytest_kforge.plugin", "pytest_kforge.profile.plugin", "pytest_kforge.trust.plugin", "pytest_kforge.xdist"]

if not any(ep.name == "kforge" for ep in importlib.metadata.entry_points(group="pytest11")):
    pytest_plugins = PLUGINS
