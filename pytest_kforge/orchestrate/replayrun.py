"""``--agents replay --replay-from <run>``: re-run a recorded run on CPU and check it reproduces.

The recorded run folder (``runs/<id>/`` or a committed copy with gzipped JSON) has everything:
the options (``state.json``), every agent exchange (``exchanges/``, written back by the replay
agents: the designer's version files, the profiler's contracts) and every suite result
(``verify-<i>.json``, served by :class:`RecordedSuiteRunner` instead of running pytest).

The replay runs in a scratch project (``--replay-root``, default a temporary folder) made from the
current root's kernel folder, devlog and knowledge base, minus the versions the run created and
any numbered after them, so the loop names the same new versions and writes nothing into the
checkout.  The run passes when every iteration names the same version, gets the same summary and
the same keep/discard decision as the recording.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..errors import KforgeError
from .state import RunState, json_path, read_json
from .suite import DEFAULT_TRIALS, SuiteOutcome

__all__ = ["RecordedSuiteRunner", "load_source", "make_scratch", "replay_options", "compare_runs", "replayed_iterations"]


class RecordedSuiteRunner:
    """Serves ``verify-<i>.json`` of the recorded run (with its recorded outcome) instead of running pytest."""

    def __init__(self, source: RunState) -> None:
        self.source = source
        self.calls: list[list[str]] = []

    def run_suite(self, kernel: str, versions: list[str], *, out_json: Path, timeout_s: float,
                  trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome:
        self.calls.append(list(versions))
        m = re.match(r"(verify|recheck)-(\d+)\.json$", out_json.name)
        rec = self.source.steps.get(f"{m.group(2)}:VERIFY") if m else None
        if m and m.group(1) == "recheck" and rec is not None:  # VERIFY's re-measurement: as recorded, or not run
            again = rec.outputs["verify"].get("recheck") or {}
            if not again.get("results_path"):
                return SuiteOutcome(False, None, "the recording has no re-measurement of these trials", "replay", 0.0)
            v = {"ok": True, "reason": again.get("reason", "ok"), "command": again.get("command", "replay"),
                 "wall_s": again.get("wall_s", 0.0), "results_path": again["results_path"]}
            return self._serve(v, versions, out_json)
        if rec is None or rec.status != "done":
            raise KforgeError(f"the recording has no finished VERIFY for {out_json.name}; replay only what the run "
                              f"did (its iterations are in {self.source.dir / 'state.json'})")
        return self._serve(rec.outputs["verify"], versions, out_json)

    def _serve(self, v: dict[str, Any], versions: list[str], out_json: Path) -> SuiteOutcome:
        """The recorded results file ``v`` names, written to ``out_json`` as the suite would have."""
        results = None
        if v.get("results_path"):
            src = json_path(self.source.dir / Path(str(v["results_path"])).name)
            if not src.exists():
                raise KforgeError(f"the recording names {v['results_path']} but {src} is missing; copy the whole run "
                                  f"folder")
            results = read_json(src)
            # a version whose every test failed has correctness records but no timed row (run 20261207-090520)
            measured = sorted({str(r.get("version")) for key in ("results", "correctness") for r in results.get(key, [])})
            if not set(versions) <= set(measured):
                raise KforgeError(f"the replay asks the suite for {', '.join(versions)} but the recording measured "
                                  f"{', '.join(measured)}; the replay does not follow the recording")
            import json

            out_json.parent.mkdir(parents=True, exist_ok=True)
            out_json.write_text(json.dumps(results, indent=1), encoding="utf-8")
        return SuiteOutcome(bool(v["ok"]), results, str(v["reason"]), str(v["command"]), float(v.get("wall_s", 0.0)))

    def profile(self, kernel: str, version: str, *, out_dir: Path, timeout_s: float,
                trials: tuple[str, ...] = DEFAULT_TRIALS) -> SuiteOutcome:
        return SuiteOutcome(False, None, "a replay does not profile: the recorded contracts are served", "replay", 0.0)


def load_source(replay_from: str, runs_dir: Path) -> RunState:
    """The recorded run: a folder holding ``state.json[.gz]``, or a run id under ``runs_dir``."""
    for cand in (Path(replay_from), Path(runs_dir) / replay_from):
        if json_path(cand / "state.json").exists():
            return RunState.load(cand.parent, cand.name)
    raise KforgeError(f"no recorded run at {replay_from} (a folder with state.json) or under {runs_dir}; pass a run "
                      f"id or a run folder such as docs/kernels/runs/<id>")


def replayed_iterations(source: RunState) -> int:
    """Iterations the recording finished (LEARN done, or stopped with the iteration's steps skipped)."""
    done = [int(k.split(":")[0]) for k, r in source.steps.items() if k.endswith(":LEARN") and r.status == "done"]
    return max(done, default=0)


def _created(source: RunState) -> list[str]:
    out = []
    for k, r in source.steps.items():
        if k.endswith(":DESIGN") and r.status == "done" and r.outputs.get("summary"):
            out += list(r.outputs["summary"].get("files_created", []))
    return out


def _vnum(name: str) -> int | None:
    m = re.match(r"^v(\d+)", name)
    return int(m.group(1)) if m else None


def make_scratch(source: RunState, root: Path, scratch: Path | None) -> Path:
    """A project for the replay: the root's kernel folder without the run's versions (and later ones),
    the shared helper folders under ``kernels/`` (``_shared``), its devlog and knowledge base.  Returns the scratch root."""
    kernel = source.kernel
    kdir = Path(root) / "kernels" / kernel
    if not kdir.is_dir():
        raise KforgeError(f"{kdir} does not exist; run the replay from the project root (or pass --root)")
    dest = Path(scratch) if scratch else Path(tempfile.mkdtemp(prefix=f"kforge-replay-{kernel}-"))
    created = {Path(p).name for p in _created(source)}
    firsts = [n for n in (_vnum(Path(p).stem) for p in created) if n is not None]
    cut = min(firsts) if firsts else None

    def skip(name: str) -> bool:
        n = _vnum(name)
        return name in created or (cut is not None and n is not None and name.endswith(".py") and n >= cut)

    shutil.copytree(kdir, dest / "kernels" / kernel, dirs_exist_ok=True,
                    ignore=lambda _d, names: [n for n in names if n == "__pycache__" or skip(n)])
    # helper folders beside the kernels (kernels/_shared): versions may import them
    shared = [f"kernels/{d.name}" for d in sorted(Path(root, "kernels").iterdir())
              if d.is_dir() and d.name.startswith("_") and d.name != "__pycache__"]
    for rel in (*shared, f"docs/kernels/{kernel}.md", "docs/knowledge", "agents"):
        src = Path(root) / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def replay_options(source: RunState) -> dict[str, Any]:
    """The recorded run's options that decide what the loop does, with its start version pinned."""
    o = dict(source.options)
    start = source.steps.get("1:ANALYZE")
    keep = ("kernel", "goals", "timeout_s", "autotune_budget_s", "suite_args")
    out = {k: o[k] for k in keep if k in o}
    out["from_version"] = start.outputs.get("current") if start is not None else o.get("from_version")
    out["iterations"] = replayed_iterations(source)
    first = json_path(source.dir / "analyze-1-results.json")
    if first.exists():
        out["results"] = str(first)
    return out


def compare_runs(source: RunState, again: RunState) -> list[str]:
    """Where the replay differs from the recording (empty: it reproduced the run)."""
    diffs = []
    for i in range(1, replayed_iterations(source) + 1):
        for step, field in (("STRATEGIZE", "new_version"), ("DESIGN", "summary"), ("EVALUATE", "decision")):
            a, b = source.steps.get(f"{i}:{step}"), again.steps.get(f"{i}:{step}")
            va = a.outputs.get(field) if a is not None else None
            vb = b.outputs.get(field) if b is not None else None
            if va != vb:
                diffs.append(f"{i}:{step} {field}: recorded {str(va)[:160]!r}, replayed {str(vb)[:160]!r}")
    return diffs
