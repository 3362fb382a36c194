"""The three agent contracts of the optimisation cycle, as dataclasses that render and parse markdown.

* :class:`ProfileContract` -- profiler -> orchestrator (``## Profile: mla v1 | b=32, s=1, t=4096``)
* :class:`OptimizationTask` -- orchestrator -> kernel designer (``## Optimization Task: mla v1 -> v2``)
* :class:`NewVersionSummary` -- kernel designer -> orchestrator (``## New Version: mla v2``)

``render()`` writes the workflow's markdown shape; ``parse(text)`` reads it back (it finds the
contract's ``## `` heading anywhere in an agent's reply) and raises :class:`ContractError`, whose
one-sentence message and ``field`` attribute name what is missing or invalid.  ``to_dict()`` and
``from_dict()`` give the JSON form.  Text fields are one line each: constructors collapse runs of
whitespace, so ``parse(x.render()) == x`` for every valid ``x``.  Numbers render in their shortest
exact form (producers round before constructing if they want short tables).

Modules: :mod:`.profile` (:class:`ProfileContract` and its rows), :mod:`.task` (:class:`OptimizationTask`),
:mod:`.summary` (:class:`NewVersionSummary`), :mod:`.prompts` (launch prompts), with the shared field
checks in ``_base`` and markdown helpers in ``_md``; every name is importable from ``pytest_kforge.contracts``.
"""

from __future__ import annotations

from ._base import ContractError
from .profile import BOTTLENECKS, BaselineRow, Opportunity, ProfileContract, StageRow
from .prompts import designer_launch_prompt, profiler_launch_prompt
from .summary import NewVersionSummary, TrialCheck
from .task import Constraints, OptimizationTask, PlannedOptimization

__all__ = [
    "ContractError", "StageRow", "Opportunity", "BaselineRow", "ProfileContract", "PlannedOptimization",
    "Constraints", "OptimizationTask", "TrialCheck", "NewVersionSummary", "BOTTLENECKS",
    "profiler_launch_prompt", "designer_launch_prompt",
]
