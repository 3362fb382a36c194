"""Nsight Compute profiling: metrics table, ncu command builder, collector, parser, rules, reports.

The main pytest process never runs under ncu: :mod:`.collect` runs the small :mod:`.driver` in a
subprocess under ``ncu --clock-control none``; :mod:`.parse` reads the report; :mod:`.rules`
classifies the bottleneck; :mod:`.report` renders the profile contract.  Everything heavy is
imported lazily; importing this package costs nothing.
"""

from __future__ import annotations

__all__ = ["profile_version"]


def __getattr__(name: str):  # lazy re-export, keeps `import pytest_kforge.profile` cheap
    if name == "profile_version":
        from .run import profile_version

        return profile_version
    raise AttributeError(name)
