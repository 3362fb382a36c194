"""SELECT: choose the DSL by the control level the next optimisations need.

The rule (also in ``orchestrate/README.md``):

* **cute-dsl** when any planned optimisation needs explicit control below the tile level:
  warp specialisation (producer/consumer warps), wgmma issue or TMA pipeline staging with
  mbarriers, register reallocation (``setmaxnreg``), named barriers, thread-block clusters or
  TMA multicast.  cuTile does not expose these; CuTe DSL does.
* **cutile-dsl** otherwise: tile sizes, split-KV / split count, pipeline depth as a hint,
  occupancy and latency hints, fusion of passes, layout changes.  These are tile-level changes and
  cuTile expresses them with less code and faster iteration.
* A catalog entry written for one language only (``languages: [cute-dsl]``) counts as needing that
  language.  A torch parent gets cutile-dsl unless the first rule fires.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CUTE_LEVEL", "TILE_LEVEL", "Selection", "control_level", "select_language"]

#: patterns of optimisations that need CuTe DSL's explicit control (matched on name/title, case-insensitive)
CUTE_LEVEL: tuple[str, ...] = (
    r"warp[ -_]?speciali[sz]", r"producer[ -_/]?consumer", r"\bwgmma\b", r"\btma\b", r"mbarrier",
    r"pipeline[ -_]?stag", r"setmaxnreg", r"register[ -_]?realloc", r"named[ -_]?barrier", r"cluster",
    r"multicast",
)
#: patterns of tile-level optimisations (informative: anything not CuTe-level is tile-level)
TILE_LEVEL: tuple[str, ...] = (
    r"tile", r"block[ -_]?size", r"split", r"occupancy", r"latency", r"fusion|fuse", r"pipeline[ -_]?depth",
    r"num[ -_]?stages", r"layout",
)


def control_level(name: str, languages: Iterable[str] = ()) -> str:
    """``"cute"`` if the optimisation ``name`` (or its entry's language) needs CuTe-level control, else ``"tile"``."""
    langs = set(languages)
    if langs == {"cute-dsl"}:
        return "cute"
    if any(re.search(p, name, re.I) for p in CUTE_LEVEL):
        return "cute"
    return "tile"


@dataclasses.dataclass
class Selection:
    language: str
    control_level: str  # "tile" | "cute"
    reason: str
    cute_level: list[str]  # the optimisations that forced cute-dsl (empty for cutile-dsl)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def select_language(planned: Iterable[Mapping[str, Any]], parent_language: str) -> Selection:
    """Apply the rule to planned optimisations (dicts with ``name`` and optional ``languages``)."""
    planned = list(planned)
    cute = [p["name"] for p in planned if control_level(str(p.get("name", "")) + " " + str(p.get("title", "")),
                                                        p.get("languages", ()) or ()) == "cute"]
    if cute:
        return Selection("cute-dsl", "cute", f"{', '.join(cute)} need(s) warp/barrier/register-level control "
                                              f"that only CuTe DSL exposes", cute)
    names = ", ".join(str(p.get("name")) for p in planned) or "no catalog entry matched"
    why = f"tile-level changes only ({names}); cuTile expresses them directly"
    if parent_language == "cute-dsl":
        why += " (parent is cute-dsl: a tile-level change can also be made there as a CONFIG change)"
    return Selection("cutile-dsl", "tile", why, [])
