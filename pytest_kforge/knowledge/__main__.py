"""``python -m pytest_kforge.knowledge``: the CLI in :mod:`pytest_kforge.knowledge.cli`."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
