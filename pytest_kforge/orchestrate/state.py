"""Run state: ``runs/<run-id>/state.json``, rewritten atomically after every step.

A step is recorded as ``running`` before it starts and ``done`` (with its outputs) when it ends,
so ``--resume`` replays the outputs of finished steps and redoes only the step that was running
when the process died (a kill in the middle of VERIFY redoes VERIFY only).  Each agent exchange
is stored beside it in ``exchanges/`` so the replay backend can re-run the run exactly.

A step handed to a person or another tool (``--agents handoff``) is recorded ``waiting``: the run
stops there with status ``waiting`` and ``--resume`` redoes that step, which then finds the reply.
The folder is relocatable: nothing in it names an absolute path that resume needs (results files
are named relative to the run folder), and a committed copy may gzip its JSON files
(``state.json.gz``, ``exchanges/*.json.gz``), which :func:`read_json` reads as they are.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import secrets
from pathlib import Path
from typing import Any

from ..errors import KforgeError
from ..fsutil import atomic_write_text, read_text_gz

__all__ = ["STEPS", "StepRecord", "RunState", "new_run_id", "read_json", "json_path"]

STEPS = ("ANALYZE", "PROFILE", "SELECT", "STRATEGIZE", "DESIGN", "VERIFY", "EVALUATE", "LEARN")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def seconds_since(iso: str) -> float:
    """Seconds from a :func:`_now` timestamp to now (0 for one that does not parse)."""
    try:
        then = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return 0.0
    return max(0.0, (_dt.datetime.now(_dt.timezone.utc) - then).total_seconds())


def json_path(path: str | Path) -> Path:
    """``path``, or its gzipped twin ``path.gz`` when only that exists (a committed run folder)."""
    p = Path(path)
    gz = p.with_name(p.name + ".gz")
    return gz if not p.exists() and gz.exists() else p


def read_json(path: str | Path) -> Any:
    """The JSON at ``path`` (or at ``path.gz``)."""
    return json.loads(read_text_gz(json_path(path)))


def new_run_id(kernel: str) -> str:
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}-{kernel}-{secrets.token_hex(2)}"


@dataclasses.dataclass
class StepRecord:
    key: str  # "<iteration>:<STEP>"
    status: str = "running"  # running | done | failed | waiting (handed off; redone on --resume)
    started: str = ""
    finished: str = ""
    wall_s: float = 0.0
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    outputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    tokens: dict[str, int] = dataclasses.field(default_factory=dict)
    cost_usd: float = 0.0
    error: str = ""


@dataclasses.dataclass
class RunState:
    run_id: str
    kernel: str
    options: dict[str, Any]
    created: str = dataclasses.field(default_factory=_now)
    status: str = "running"  # running | done | failed | waiting | dry-run
    steps: dict[str, StepRecord] = dataclasses.field(default_factory=dict)
    versions: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # summary rows
    notes: list[str] = dataclasses.field(default_factory=list)
    dir: Path = Path(".")

    # -- persistence -------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.dir / "state.json"

    def save(self) -> None:
        d = dataclasses.asdict(self)
        d.pop("dir")
        atomic_write_text(self.path, json.dumps(d, indent=2, default=str) + "\n")

    @classmethod
    def create(cls, runs_dir: Path, kernel: str, options: dict[str, Any], run_id: str | None = None) -> RunState:
        rid = run_id or new_run_id(kernel)
        st = cls(rid, kernel, options, dir=Path(runs_dir) / rid)
        st.dir.mkdir(parents=True, exist_ok=True)
        st.save()
        return st

    @classmethod
    def load(cls, runs_dir: Path, run_id: str) -> RunState:
        path = json_path(Path(runs_dir) / run_id / "state.json")
        if not path.exists():
            known = sorted(p.parent.name for p in Path(runs_dir).glob("*/state.json"))
            raise KforgeError(f"no run {run_id!r} under {runs_dir}: it has {', '.join(known) or 'no runs'}; "
                              f"pass one of those to --resume")
        try:
            d = read_json(path)
            steps = {k: StepRecord(**v) for k, v in d.pop("steps").items()}
            return cls(**d, steps=steps, dir=path.parent)
        except (ValueError, TypeError, KeyError) as exc:
            raise KforgeError(f"{path} is not a readable run state ({exc}); start a new run instead of "
                              f"--resume") from exc

    # -- steps -------------------------------------------------------------------------------
    def done(self, key: str) -> StepRecord | None:
        rec = self.steps.get(key)
        return rec if rec is not None and rec.status == "done" else None

    def begin(self, key: str, inputs: dict[str, Any]) -> StepRecord:
        rec = StepRecord(key, "running", _now(), inputs=inputs)
        self.steps[key] = rec
        self.save()
        return rec

    def finish(self, rec: StepRecord, outputs: dict[str, Any], wall_s: float, tokens: dict[str, int] | None = None,
               cost_usd: float = 0.0) -> None:
        rec.status, rec.finished, rec.wall_s, rec.outputs = "done", _now(), round(wall_s, 3), outputs
        rec.tokens, rec.cost_usd = dict(tokens or {}), round(cost_usd, 6)
        self.save()

    def fail(self, rec: StepRecord, error: str, wall_s: float) -> None:
        rec.status, rec.finished, rec.wall_s, rec.error = "failed", _now(), round(wall_s, 3), error
        self.status = "failed"
        self.save()

    def wait(self, rec: StepRecord, message: str, wall_s: float) -> None:
        """The step is handed off: ``message`` says what to write where; the run stops, resumable."""
        rec.status, rec.finished, rec.wall_s, rec.error = "waiting", _now(), round(wall_s, 3), message
        self.status = "waiting"
        self.save()

    def waiting(self) -> StepRecord | None:
        return next((r for r in self.steps.values() if r.status == "waiting"), None)

    def totals(self) -> dict[str, Any]:
        tokens: dict[str, int] = {}
        cost = 0.0
        for rec in self.steps.values():
            for k, v in rec.tokens.items():
                tokens[k] = tokens.get(k, 0) + int(v)
            cost += rec.cost_usd
        return {"tokens": tokens, "cost_usd": round(cost, 6)}

    # -- agent exchanges ---------------------------------------------------------------------
    def exchange_path(self, key: str, agent: str) -> Path:
        return self.dir / "exchanges" / f"{key.replace(':', '-')}-{agent}.json"

    def save_exchange(self, key: str, agent: str, exchange: dict[str, Any]) -> Path:
        path = self.exchange_path(key, agent)
        atomic_write_text(path, json.dumps(exchange, indent=2, default=str) + "\n")
        return path
