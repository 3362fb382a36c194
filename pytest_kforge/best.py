"""The best version, computed from results and recorded as data (``docs/kernels/<kernel>/best.json``).

The rule (:data:`RULE`, also written into every record and stated in the README):

* only correct, measured rows count (``correct``, no ``error``, a ``median_us``:
  :attr:`~pytest_kforge.results.TrialResult.measured`);
* **per trial**, the best is the lowest median;
* **overall** (criterion :data:`CRITERION`), the best is the version with the lowest sum of its medians over
  the default trials -- the time of one call of each -- among versions measured on all of them; a version
  missing a trial does not rank overall (it is listed after those that do).

The devlog's current-best table is rendered from the record (:mod:`pytest_kforge.devlog`), the orchestrator
starts from its ``best`` (:func:`best_version`), and the READMEs name the same version (a test pins all three).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .results import ResultsError, TrialResult

__all__ = ["RULE", "CRITERION", "SCHEMA_VERSION", "BestRecord", "rank", "compute", "best_path", "load_best",
           "best_version"]

SCHEMA_VERSION = 1
CRITERION = "sum_of_trial_medians_us"
RULE = ("Only correct, measured rows count (correct, no error, a median). Per trial: the lowest median. Overall: "
        "among the versions measured on every default trial, the lowest sum of those medians (the time of one "
        "call of each default trial); a version missing a trial does not rank overall.")
#: the per-trial figures a record keeps of each row
_CELLS = ("median_us", "tflops", "pct_floor", "spread_pct", "id", "note")


def rank(results: Iterable[TrialResult], trials: Sequence[str]) -> list[dict[str, Any]]:
    """One row per version (``version``, ``language``, ``score_us`` or None, and per trial its figures), best
    first: by :data:`CRITERION`, then the versions missing a trial (most trials first, then the lower sum of the
    medians they have)."""
    rows: dict[str, dict[str, Any]] = {}
    for r in results:
        if not r.measured or r.trial not in trials:
            continue
        row = rows.setdefault(r.version, {"version": r.version, "language": r.language, "trials": {}})
        data = r.to_json()
        row["trials"][r.trial] = {k: data.get(k) for k in _CELLS}
    for row in rows.values():
        medians = [row["trials"][t]["median_us"] for t in trials if t in row["trials"]]
        row["score_us"] = round(math.fsum(medians), 3) if len(medians) == len(trials) else None

    def order(row: dict[str, Any]) -> tuple[int, float, str]:
        if row["score_us"] is not None:
            return (0, row["score_us"], row["version"])
        # not ranked overall: most trials first, then the lower sum over the trials it has
        return (1 + len(trials) - len(row["trials"]), math.fsum(c["median_us"] for c in row["trials"].values()),
                row["version"])

    return sorted(rows.values(), key=order)


@dataclasses.dataclass
class BestRecord:
    """The machine-readable best of one kernel: the rule, where the results came from, and the ranking."""

    kernel: str
    trials: list[str]
    best: str | None
    per_trial: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]]
    gpu: str | None = None
    date: str = ""
    command: str = ""
    #: the results files it was computed from (the parts of one run), repository-relative where possible
    sources: list[str] = dataclasses.field(default_factory=list)
    #: re-runs whose rows replaced those versions' rows in the parts
    reruns: list[str] = dataclasses.field(default_factory=list)
    #: the floors' ceilings of the run, ``{"tbs": 3.06, "tflops": 784.0}`` (None: records before calibration,
    #: whose floors are the H200 default)
    roofline: dict[str, float] | None = None
    rule: str = RULE
    criterion: str = CRITERION
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BestRecord:
        version = int(data.get("schema_version", 0))
        if version != SCHEMA_VERSION:
            raise ResultsError(f"best record schema_version {version} is not {SCHEMA_VERSION}; rewrite it with "
                               f"`python -m pytest_kforge.devlog best`")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def write(self, path: Path) -> None:
        from .fsutil import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_json()
        # one line per ranked row (72 versions x 2 trials at indent=1 took 41 KB of the 4 MB checkout budget)
        rows = ",\n  ".join(json.dumps(r, separators=(",", ":")) for r in data.get("rows", []))
        head = json.dumps({k: v for k, v in data.items() if k != "rows"}, indent=1)
        atomic_write_text(path, head[:-2] + f',\n "rows": [\n  {rows}\n ]\n}}\n')


def compute(kernel: str, results: Iterable[TrialResult], trials: Sequence[str], **meta: Any) -> BestRecord:
    """The record of ``results`` under :data:`RULE` (``meta``: gpu, date, command, sources, reruns)."""
    rows = rank(list(results), trials)
    per_trial: dict[str, dict[str, Any]] = {}
    for t in trials:
        having = [r for r in rows if t in r["trials"]]
        if having:
            top = min(having, key=lambda r: (r["trials"][t]["median_us"], r["version"]))
            per_trial[t] = {"version": top["version"], "median_us": top["trials"][t]["median_us"]}
    best = rows[0]["version"] if rows and rows[0]["score_us"] is not None else None
    return BestRecord(kernel=kernel, trials=list(trials), best=best, per_trial=per_trial, rows=rows, **meta)


def best_path(root: str | Path, kernel: str) -> Path:
    """Where a project keeps ``kernel``'s record: ``<root>/docs/kernels/<kernel>/best.json``."""
    return Path(root) / "docs" / "kernels" / kernel / "best.json"


def load_best(path: str | Path) -> BestRecord:
    path = Path(path)
    try:
        return BestRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise ResultsError(f"cannot read the best record {path}: {exc}; write it with "
                           f"`python -m pytest_kforge.devlog best --from-json RESULTS...`") from exc


def best_version(path: str | Path, known: Sequence[str]) -> str | None:
    """The record's overall best when the file exists and names a version in ``known``, else None."""
    if not Path(path).is_file():
        return None
    name = load_best(path).best
    return name if name in known else None
