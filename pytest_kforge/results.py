"""The results JSON as typed records: one :class:`TrialResult` per timed trial, one :class:`RunResults` per run.

``--kforge-json`` writes a :class:`RunResults` (``to_json``); the xdist merge, the devlog, the profiler and
the orchestrator read one back (:func:`load_results`, gzipped or not).  ``schema_version`` is
:data:`SCHEMA_VERSION`; files written before it existed (runs up to 28) have none and read as version 1,
whose rows are the same keys.  Keys a record does not know (a hook's addition, a newer writer's field)
are kept in ``extra`` and written back unchanged, so nothing is lost on a round trip.  The schema, key
by key, is in the README ("The results JSON").
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["SCHEMA_VERSION", "TrialResult", "CorrectnessRecord", "RunResults", "load_results", "ResultsError"]

#: 2: ``schema_version`` written; 1: the unversioned files of runs 1-28 (same keys)
SCHEMA_VERSION = 2


class ResultsError(ValueError):
    """A file that is not a results JSON this version can read (the message says what to do)."""


def _split(cls: Any, data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    known = {k: v for k, v in data.items() if k in names}
    return known, {k: v for k, v in data.items() if k not in names}


@dataclasses.dataclass
class TrialResult:
    """One version timed on one trial config (a row of ``results``)."""

    version: str
    trial: str
    #: the trial config with its shape, ``decode-b32-s1-t4096-h128`` (every harness row has one)
    id: str = ""
    language: str = ""
    parent: str | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    note: str = ""
    #: the outputs were right (False also for a contract problem); ``error`` says why a row is rejected
    correct: bool = False
    median_us: float | None = None
    min_us: float | None = None
    iqr_us: float | None = None
    spread_pct: float | None = None
    rounds: int = 0
    tflops: float | None = None
    gbps: float | None = None
    pct_floor: float | None = None
    floor_us: float | None = None
    error: str | None = None
    # -- written once the trial was timed (absent from a row rejected before) ----------------------
    clock: str | None = None
    flush: str | None = None
    host_us: float | None = None
    b2b_us: float | None = None
    #: the host time of one call issued back to back (``timing.back_to_back``), the steady state of a serving loop
    b2b_host_us: float | None = None
    stream_audit: str | None = None
    samples_us: list[float] | None = None
    sm_clock_mhz: dict[str, float] | None = None
    clock_events: list[str] | None = None
    clock_retaken: int | None = None
    clock_guard: str | None = None
    clock_note: str | None = None
    sm_clock_witness: dict[str, Any] | None = None
    #: the trial test's node id (xdist workers send it with each row)
    test: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    #: keys every row carries, even when None (the rest are written only when set)
    ALWAYS: ClassVar[tuple[str, ...]] = (
        "version", "language", "parent", "trial", "id", "params", "note", "correct", "median_us", "min_us",
        "iqr_us", "spread_pct", "rounds", "tflops", "gbps", "pct_floor", "floor_us", "error")

    @property
    def measured(self) -> bool:
        """Timed, correct and not rejected: a row that may rank (the devlog's and the orchestrator's rule)."""
        return self.correct and not self.error and self.median_us is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and (f.name in self.ALWAYS or value is not None):
                out[f.name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialResult:
        known, extra = _split(cls, data)
        missing = [k for k in ("version", "trial") if k not in known]
        if missing:
            raise ResultsError(f"a results row lacks {', '.join(missing)}: {dict(data)!r:.120}; pass rows written by "
                               f"--kforge-json")
        return cls(**known, extra=extra)


@dataclasses.dataclass
class CorrectnessRecord:
    """One correctness or fuzz test's outcome (a row of ``correctness``)."""

    version: str
    test: str
    passed: bool
    message: str = ""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "test": self.test, "passed": self.passed, "message": self.message,
                **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CorrectnessRecord:
        known, extra = _split(cls, data)
        return cls(**{"version": "", "test": "", "passed": False, **known}, extra=extra)


@dataclasses.dataclass
class RunResults:
    """A whole results JSON: the run's identity, its trial rows and its correctness records."""

    kernel: str | None = None
    gpu: str | None = None
    device: str | None = None
    seed: int | None = None
    started: str | None = None
    #: the floors' peaks, ``{"tbs": 4.3, "tflops": 790.0}``
    roofline: dict[str, float] | None = None
    results: list[TrialResult] = dataclasses.field(default_factory=list)
    correctness: list[CorrectnessRecord] = dataclasses.field(default_factory=list)
    #: xdist: per worker, its GPU, counts and GPU-section times
    workers: dict[str, Any] | None = None
    #: recovered from a killed run's journal (:mod:`pytest_kforge.journal`)
    partial: bool = False
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": self.schema_version, "kernel": self.kernel, "gpu": self.gpu,
                               "device": self.device, "seed": self.seed, "started": self.started,
                               "roofline": self.roofline}
        if self.partial:
            out["partial"] = True
        out["results"] = [r.to_json() for r in self.results]
        out["correctness"] = [c.to_json() for c in self.correctness]
        if self.workers is not None:
            out["workers"] = self.workers
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResults:
        if not isinstance(data, Mapping) or not isinstance(data.get("results"), list):
            raise ResultsError("not a results JSON: it has no 'results' list; pass a file written by --kforge-json")
        version = int(data.get("schema_version", 1))
        if version > SCHEMA_VERSION:
            raise ResultsError(f"results schema_version {version} is newer than this pytest-kforge reads "
                               f"({SCHEMA_VERSION}); upgrade pytest-kforge")
        known, extra = _split(cls, data)
        known["results"] = [TrialResult.from_json(r) for r in known["results"]]
        known["correctness"] = [CorrectnessRecord.from_json(c) for c in known.get("correctness") or []]
        known["schema_version"] = version
        return cls(**known, extra=extra)

    def versions(self) -> list[str]:
        """The versions with a trial row, sorted."""
        return sorted({r.version for r in self.results})


def load_results(path: str | Path) -> RunResults:
    """Read a results JSON, gzipped (as stored under ``docs/kernels/runs/``) or not; :class:`ResultsError` when
    it cannot be read, naming the file."""
    from . import artifacts  # lazy: the model itself needs no archive code

    path = Path(path)
    try:
        raw = artifacts.read_bytes(path)  # loose, or packed in a run archive (the README's artifact policy)
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)  # gzip by its magic
        return RunResults.from_json(data)
    except (OSError, ValueError, EOFError, zlib.error, TypeError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}") from exc
