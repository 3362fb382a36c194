"""The eight steps' implementations (``step_analyze`` ... ``step_learn``), mixed into the loop's driver.

Each ``step_<name>(iteration, key)`` reads the working context ``self.ctx`` (the outputs of the
steps before it) and returns its own outputs as a JSON-able dict with a one-line ``line`` summary;
:class:`pytest_kforge.orchestrate.loop.Orchestrator` stores them in the run state and merges them
into the context.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import artifacts
from ..best import best_path, best_version
from ..errors import KforgeError
from ..fsutil import atomic_write_text, replace_marked_block
from ..registry import kernel_tags, version_path
from . import compat, learn, strategy
from .agents.base import AgentContext, DesignImpossible
from .agents.offline import (CAPTURED_ON, OfflineProfiler, literal_config, metrics_from_contract,
                             next_version_name, propose_config, tried_configs)
from .evaluate import borderline, decide, goals_met, parse_goal, rows_by_trial, version_correct
from .select import select_language
from .state import RunState, json_path
from .suite import DEFAULT_TRIALS, SuiteRunner, oom_notes

if TYPE_CHECKING:
    from .options import Options

__all__ = ["Steps"]


class Steps:
    """The step implementations; the driver (``Orchestrator``) sets these attributes and runs the steps."""

    o: Options
    profiler: Any
    designer: Any
    runner: SuiteRunner
    kb: Any
    ctx: dict[str, Any]
    state: RunState | None
    devlog: Path
    out: Callable[[str], None]
    _usage: dict[str, int]  # token usage and cost of the step that is running
    _cost: float

    @property
    def has_gpu(self) -> bool:
        raise NotImplementedError  # the driver knows (it is told, or it asks torch)

    def _agent_ctx(self, key: str, **kw: Any) -> AgentContext:
        return AgentContext(root=self.o.root, kernels_dir=self.o.kernels_dir, kernel=self.o.kernel,  # type: ignore[arg-type]
                            step_key=key, runner=self.runner, knowledge=self.kb,
                            can_profile=not self.o.dry_run and self.has_gpu,
                            reports_dir=self.o.root / "reports", timeout_s=self.o.timeout_s,
                            run_dir=self.state.dir if self.state else None,
                            trials=tuple(self.ctx.get("trials", ())), **kw)

    def _record(self, key: str, label: str, actx: AgentContext) -> None:
        assert self.state is not None
        for k, v in actx.usage.items():
            self._usage[k] = self._usage.get(k, 0) + v
        self._cost += actx.cost_usd
        actx.exchange["usage"], actx.exchange["cost_usd"], actx.exchange["notes"] = actx.usage, actx.cost_usd, actx.notes
        self.state.save_exchange(key, label, actx.exchange)

    def _rel(self, path: str) -> str:
        p = Path(path)
        return p.relative_to(self.o.root).as_posix() if p.is_absolute() and p.is_relative_to(self.o.root) else path

    def _results(self, path: str | None) -> dict[str, Any] | None:
        """A results JSON named absolute, or relative to the run folder (where the run keeps the ones it
        uses, so a copied folder resumes elsewhere) or to the root."""
        if not path:
            return None
        bases = [b for b in (self.state.dir if self.state else None, self.o.root) if b is not None]
        cands = [Path(path)] if Path(path).is_absolute() else [b / path for b in bases]
        found = next((json_path(c) for c in cands if artifacts.exists(json_path(c))), None)  # loose or archived
        from ..results import load_results

        return load_results(found).to_json() if found is not None else None

    def _keep_results(self, path: str | None, version: str, i: int) -> str | None:
        """The rows of ``version`` from a results JSON outside the run folder, copied into it
        (``analyze-<i>-results.json``); returns the name the run state keeps."""
        data = self._results(path)
        if data is None or self.state is None or (Path(path or "").parent == self.state.dir):
            return path
        mine = {k: ([r for r in v if isinstance(r, dict) and r.get("version") == version]
                    if k in ("results", "correctness") and isinstance(v, list) else v) for k, v in data.items()}
        mine["copied_from"] = self._rel(str(path))
        name = f"analyze-{i}-results.json"
        atomic_write_text(self.state.dir / name, json.dumps(mine, indent=1) + "\n")
        return name

    # -- 1 ANALYZE -----------------------------------------------------------------------------
    def step_analyze(self, i: int, key: str) -> dict[str, Any]:
        from ..registry import Registry

        kernel = Registry(self.o.kernels_dir).kernel(self.o.kernel)  # type: ignore[arg-type]
        names = kernel.version_names()
        text = self.devlog.read_text(encoding="utf-8") if self.devlog.exists() else ""
        if i == 1:
            # the best record (pytest_kforge.best), the value the devlog table and the READMEs show
            recorded = best_version(best_path(self.o.root, self.o.kernel), names)
            current = self.o.from_version or recorded or names[-1]
            if current not in names:
                raise KforgeError(f"--from {current!r} is not a version of {self.o.kernel}; it has "
                                  f"{', '.join(names)}; pick one of those")
        else:
            current = self.ctx["current"]
        found = None if self.ctx.get("latest_results") else self._find_results(current)
        results_path = self.ctx.get("latest_results") or self._keep_results(found, current, i)
        stress = bool(learn.re.search(r"stress (config|trial)[^.\n]{0,60}(needed|required)", text, learn.re.I))
        trials = list(getattr(kernel.spec, "default_trials", DEFAULT_TRIALS))
        if stress and "stress" in getattr(kernel.spec, "trials", {}):
            trials.append("stress")  # the devlog says the first two configs are not enough
        params = {t: dict(kernel.spec.trials[t]) for t in trials if t in getattr(kernel.spec, "trials", {})}
        rows = rows_by_trial(self._results(results_path) or {}, current)
        source = f"from {Path(found or results_path).name}" if results_path else "none"
        line = (f"current {current} ({kernel.version(current).language}); devlog "
                f"{'found' if text else 'missing'}; results {source}"
                + "".join(f"; {t} {_us(r.get('median_us'))} us" for t, r in rows.items()))
        out = {"current": current, "current_language": kernel.version(current).language, "results_path": results_path,
               "devlog_overview": learn.read_block(text, "overview")[:2000], "devlog_best": learn.read_block(text, "best"),
               "trials": trials, "trial_params": params, "line": line}
        if i == 1:
            out["start"] = {"version": current, "rows": rows}
        return out

    def _find_results(self, version: str) -> str | None:
        from ..results import ResultsError, load_results

        cands = [Path(self.o.results)] if self.o.results else []
        assert self.o.runs_dir is not None
        found = list(self.o.runs_dir.glob("*/verify-*.json"))
        found += list((self.o.root / "reports" / self.o.kernel).glob("*results*.json"))
        cands += sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)
        # then the committed suites (loose or archived: no mtime to sort by; run folders start with their date)
        committed = artifacts.glob(self.o.root / "docs" / "kernels" / "runs", "**/suite*.json.gz")
        cands += sorted(committed, key=lambda p: p.relative_to(self.o.root).as_posix(), reverse=True)
        for p in cands:
            try:
                data = load_results(p)
            except ResultsError:
                continue
            if data.kernel == self.o.kernel and any(r.version == version for r in data.results):
                return str(p)
        return None

    # -- 2 PROFILE -----------------------------------------------------------------------------
    def step_profile(self, i: int, key: str) -> dict[str, Any]:
        current = self.ctx["current"]
        by_version = dict(self.ctx.get("profiles_by_version", {}))
        results = self._results(self.ctx.get("results_path"))
        profiles: dict[str, Any] = dict(by_version.get(current, {}))
        reused = sorted(profiles)
        profiler = OfflineProfiler() if self.o.dry_run else self.profiler
        notes: list[str] = []
        cards: set[str] = set()  # the GPUs the reports read from disk were captured on
        for trial in self.ctx["trials"]:
            if trial in profiles:
                continue
            actx = self._agent_ctx(key, results=results, profiles=profiles)
            if self.o.dry_run:
                actx.can_profile = False  # a dry run reads existing reports and results only
            try:
                c = profiler.profile(self.o.kernel, current, trial, self.ctx["trial_params"].get(trial, {}),
                                     context=actx)
            except DesignImpossible as exc:
                if not self.o.dry_run:
                    raise
                notes.append(str(exc))
                continue
            finally:
                if not self.o.dry_run:
                    self._record(key, f"profiler-{trial}", actx)
            notes += actx.notes
            if actx.exchange.get(CAPTURED_ON):
                cards.add(str(actx.exchange[CAPTURED_ON]))
            profiles[trial] = self._contract_dict(c)
        metrics = {t: self._metrics(d) for t, d in profiles.items()}
        by_version[current] = profiles
        if profiles and not self.o.dry_run:
            body = learn.perf_body(self.o.root, self.o.kernel, current, profiles, self.state.run_id)  # type: ignore[union-attr]
            replace_marked_block(self.devlog, "perf", body, heading="## Performance")
        line = "; ".join(f"{t}: {d['bottleneck']}-bound, {d['stages'][0]['duration_us']:.1f} us first stage"
                         for t, d in profiles.items()) or "no profile data"
        if reused:
            line += f" (reused {', '.join(reused)} from an earlier step)"
        if cards:
            line += f"; {CAPTURED_ON} {', '.join(sorted(cards))}"
        return {"profiles": profiles, "metrics": metrics, "profiles_by_version": by_version, "profile_notes": notes,
                "line": line}

    @staticmethod
    def _contract_dict(c: Any) -> dict[str, Any]:
        d = c.to_dict()
        if isinstance(getattr(c, "metrics", None), dict):
            d["metrics"] = dict(c.metrics)  # raw ncu metrics from the report, for catalog matching
        return d

    def _metrics(self, contract_dict: dict[str, Any]) -> dict[str, float]:
        C = compat.contracts
        m = metrics_from_contract(C.ProfileContract.from_dict(contract_dict))
        m.update({k: float(v) for k, v in (contract_dict.get("metrics") or {}).items() if isinstance(v, (int, float))})
        return m

    def _applied(self, version: str) -> dict[str, str]:
        """``{entry: why}`` the version already applies: its FEATURES as the registry imported them (a version
        often builds them from a shared tuple, which reading the file cannot see), else what its code shows --
        the profiler's rule (:mod:`pytest_kforge.profile.run`)."""
        from ..profile.features import version_features
        from ..registry import Registry

        try:
            declared = Registry(self.o.kernels_dir).kernel(self.o.kernel).version(version).features  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - an unimportable version: read its file instead
            declared = None
        return version_features(self.o.kernels_dir, self.o.kernel, version, declared=declared)  # type: ignore[arg-type]

    # -- 3 SELECT ------------------------------------------------------------------------------
    def step_select(self, i: int, key: str) -> dict[str, Any]:
        cands = []
        for d in self.ctx.get("profiles", {}).values():
            for o in d.get("opportunities", []):
                cands.append({"name": o["name"], "title": o.get("entry", "")})
        applied = self._applied(self.ctx["current"])
        tags = kernel_tags(self.o.kernel, self.o.kernels_dir)
        for m in self.ctx.get("metrics", {}).values():
            cands += [f for f in (compat.match_fields(x) for x in self.kb.match(m, kernel_tags=tags))
                      if f["name"] not in applied][:3]
        # one entry named by the profiler (by path) and matched by the catalog (by name) is one candidate
        seen: set[str] = set()
        for c in list(cands):
            t = str(c.get("title") or "")
            k = Path(t).stem if t.endswith(".md") else c["name"]
            if k in seen:
                cands.remove(c)
            seen.add(k)
        sel = select_language(cands, self.ctx["current_language"])
        design_language = sel.language
        line = f"{sel.language}: {sel.reason}"
        if self.o.agents == "offline" and sel.language != self.ctx["current_language"]:
            design_language = self.ctx["current_language"]
            line += (f"; the offline designer changes CONFIG only, so it stays in {design_language} "
                     f"(deferred to an LLM designer: {', '.join(sel.cute_level) or 'a language switch'})")
        return {"selection": sel.to_dict(), "design_language": design_language, "line": line}

    # -- 4 STRATEGIZE --------------------------------------------------------------------------
    def step_strategize(self, i: int, key: str) -> dict[str, Any]:
        current = self.ctx["current"]
        applied = self._applied(current)
        made = [str(h.get("version")) for h in self.ctx.get("history", [])]
        refuted = strategy.refuted_entries(self.kb, self.o.kernel, current, this_run=made)
        declined = strategy.declined_items(self.devlog.read_text(encoding="utf-8") if self.devlog.exists() else "",
                                           current)
        apply, avoid = strategy.pick_entries(self.kb, self.ctx.get("metrics", {}), self.ctx.get("profiles", {}),
                                             kernel=self.o.kernel, language=self.ctx["design_language"],
                                             applied=applied, tags=kernel_tags(self.o.kernel, self.o.kernels_dir),
                                             refuted={**declined, **refuted})
        planned = [{"name": a["title"] or a["name"], "entry": a["name"], "languages": a["languages"],
                    "config": a["config"], "link": self._rel(a["path"]),
                    "rationale": f"{'catalog match' if a['path'] else 'counter-derived opportunity'} on "
                                 f"{a['trial']} ({a['trigger'] or 'profile opportunity'}), "
                                 f"est. {a['est_gain_pct']:g}% gain"} for a in apply]
        planned = learn.unique_by_entry(planned)  # one item per catalog entry, whatever named it
        if not planned:
            planned = [{"name": "manual promising tile", "entry": "", "languages": [], "config": {}, "link": "",
                        "rationale": "no catalog entry matches the profile, so try the next hand-picked tile or "
                                     "split value (seed tuning policy: manual promising tiles first)"}]
        history = self.ctx.get("history", [])
        phase, why = strategy.tuning_phase(history, current, self.o.autotune_budget_s)
        # named in the design language's line (mla: v61_cute after v60_cute, v12 after v11)
        new_version = next_version_name(self.o.kernels_dir / self.o.kernel, self.ctx["design_language"])  # type: ignore[operator]
        out: dict[str, Any] = {"planned": planned, "avoid": [a["name"] for a in avoid], "tuning": phase,
                               "tuning_why": why, "new_version": new_version, "already_applied": sorted(applied),
                               "refuted": refuted, "declined": declined}
        if self.o.agents == "offline" or self.o.dry_run:
            from ..registry import Registry

            parent = Registry(self.o.kernels_dir).kernel(self.o.kernel).version(current)  # type: ignore[arg-type]
            prop = propose_config(parent.config, planned, tried_configs(self.o.kernels_dir / self.o.kernel))  # type: ignore[operator]
            out["proposed_change"] = prop[1] if prop else ["none applicable (CONFIG has no known knob)"]
        if phase == "stop":
            out.update({"stop": why, "iteration_stop": i})
        out["line"] = (f"{len(apply)} catalog entr{'y' if len(apply) == 1 else 'ies'} picked "
                       f"({', '.join(p['name'] for p in planned)}); tuning: {phase}; next version {new_version}")
        if self.o.dry_run:
            self._print_plan(out)
        return out

    def _print_plan(self, plan: dict[str, Any]) -> None:
        assert self.state is not None
        text = strategy.render_plan(self.o.kernel, self.ctx, plan, self.o.goals, self.o.iterations)
        self.out(text)
        atomic_write_text(self.state.dir / "plan.txt", text + "\n")

    # -- 5 DESIGN ------------------------------------------------------------------------------
    def step_design(self, i: int, key: str) -> dict[str, Any]:
        current, new = self.ctx["current"], self.ctx["new_version"]
        task = strategy.build_task(kernel=self.o.kernel, current=current, new_version=new,
                                   profiles=self.ctx.get("profiles", {}), metrics=self.ctx.get("metrics", {}),
                                   planned=[{**p, "name": p["entry"] or p["name"]} if self.o.agents == "offline" else p
                                            for p in learn.unique_by_entry(self.ctx["planned"])],
                                   selection=self.ctx.get("selection", {}),
                                   design_language=self.ctx["design_language"], offline=self.o.agents == "offline")
        actx = self._agent_ctx(key, language=self.ctx["design_language"],
                               matches=[{"name": p["entry"] or p["name"], "title": p["name"], "config": p["config"],
                                         "languages": p["languages"]} for p in learn.unique_by_entry(self.ctx["planned"])],
                               profiles=self.ctx.get("profiles", {}))
        actx.exchange["task"] = task.render()
        try:
            summary = self.designer.design(task, context=actx)
        except DesignImpossible as exc:
            return {"task": task.to_dict(), "stop": str(exc), "iteration_stop": i, "line": f"no design: {exc}"}
        finally:
            self._record(key, "designer", actx)
        path = version_path(self.o.kernels_dir / self.o.kernel, summary.version)  # type: ignore[operator]
        if summary.version != new or not path.exists():
            raise KforgeError(f"the designer reported {summary.version} but {path} "
                              f"{'does not exist' if not path.exists() else 'was not the planned ' + new}; the "
                              f"designer must create {version_path(self.o.kernels_dir / self.o.kernel, new)}")  # type: ignore[operator]
        return {"task": task.to_dict(), "task_md": task.render(), "summary": summary.to_dict(),
                "line": f"{new} from {current}: {'; '.join(summary.changes)} (designer says {summary.correctness})"}

    # -- 6 VERIFY ------------------------------------------------------------------------------
    def step_verify(self, i: int, key: str) -> dict[str, Any]:
        assert self.state is not None
        current, new = self.ctx["current"], self.ctx["new_version"]
        out_json = self.state.dir / f"verify-{i}.json"
        trials = tuple(self.ctx["trials"])
        outcome = self.runner.run_suite(self.o.kernel, [current, new], out_json=out_json, timeout_s=self.o.timeout_s,
                                        trials=trials)
        notes = oom_notes(outcome.results)
        new_profiles: dict[str, Any] = {}
        recheck: dict[str, Any] = {}
        if outcome.ok and outcome.results is not None:
            if not out_json.exists():
                atomic_write_text(out_json, json.dumps(outcome.results, indent=1))
        # named relative to the run folder, so a copied run folder resumes elsewhere
            correct, why = version_correct(outcome.results, new)
            if not correct:
                notes.append(f"{new} not profiled: {why}")
            else:
                recheck = self._recheck(i, current, new, outcome.results, notes)
                for trial in trials:
                    actx = self._agent_ctx(key, results=outcome.results)
                    try:
                        c = self.profiler.profile(self.o.kernel, new, trial, self.ctx["trial_params"].get(trial, {}),
                                                  context=actx)
                        new_profiles[trial] = self._contract_dict(c)
                    except DesignImpossible as exc:
                        notes.append(f"no profile of {new} {trial}: {exc}")
                    finally:
                        self._record(key, f"profiler-{trial}", actx)
                    notes += actx.notes
        by_version = dict(self.ctx.get("profiles_by_version", {}))
        if new_profiles:
            by_version[new] = new_profiles
        line = f"suite {'ran' if outcome.ok else 'FAILED'} ({outcome.reason}, {outcome.wall_s:.0f} s)"
        line += "".join(f"; note: {n}" for n in notes if "halved" in n or "memory" in n.lower())
        if recheck.get("results_path"):
            line += f"; {', '.join(recheck['trials'])} measured again ({recheck['wall_s']:.0f} s)"
        return {"verify": {"ok": outcome.ok, "reason": outcome.reason, "command": outcome.command,
                           "wall_s": outcome.wall_s, "results_path": out_json.name if outcome.results else None,
                           "recheck": recheck},
                "verify_notes": notes, "profiles_by_version": by_version, "line": line}

    def _recheck(self, i: int, current: str, new: str, results: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        """A second suite session for the trials whose verdict is borderline (``evaluate.borderline``), both
        versions, into ``recheck-<i>.json``: EVALUATE counts a verdict only when both sessions agree."""
        trials = borderline(decide(results, current, new).per_trial)
        if not trials:
            return {}
        assert self.state is not None
        out_json = self.state.dir / f"recheck-{i}.json"
        again = self.runner.run_suite(self.o.kernel, [current, new], out_json=out_json, timeout_s=self.o.timeout_s,
                                      trials=tuple(trials))
        if not again.ok or again.results is None:
            notes.append(f"the re-measurement of {', '.join(trials)} did not run ({again.reason}): the first "
                         f"session's verdict stands")
            return {"trials": trials, "results_path": None, "reason": again.reason, "wall_s": again.wall_s}
        if not out_json.exists():
            atomic_write_text(out_json, json.dumps(again.results, indent=1))
        notes.append(f"{', '.join(trials)} measured again: the first verdict cleared its bar by less than the bar")
        return {"trials": trials, "results_path": out_json.name, "reason": again.reason, "wall_s": again.wall_s,
                "command": again.command}

    # -- 7 EVALUATE ----------------------------------------------------------------------------
    def step_evaluate(self, i: int, key: str) -> dict[str, Any]:
        current, new = self.ctx["current"], self.ctx["new_version"]
        v = self.ctx["verify"]
        results = self._results(v.get("results_path")) if v["ok"] else None
        if results is None:
            d = {"kept": False, "reason": f"discarded: the suite did not run ({v['reason']})", "per_trial": {}}
        else:
            rc = (v.get("recheck") or {}).get("results_path")
            d = decide(results, current, new, recheck=self._results(rc) if rc else None).to_dict()
        nxt = new if d["kept"] else current
        rows = rows_by_trial(results or {}, nxt)
        goals = [parse_goal(g) for g in self.o.goals]
        met, glines = goals_met(goals, rows)
        new_rows = rows_by_trial(results or {}, new)
        row = {"version": new, "parent": current, "dsl": self.ctx["design_language"], "kept": d["kept"],
               "why": d["reason"], "verify_s": v.get("wall_s", 0.0),
               **{f"{t}_us": r.get("median_us") for t, r in new_rows.items()},
               **{f"{t}_pct_floor": r.get("pct_floor") for t, r in new_rows.items()}}
        out = {"decision": d, "goal_lines": glines, "goal_met": met, "current": nxt,
               "current_language": self.ctx["design_language"] if d["kept"] else self.ctx["current_language"],
               "history": [*(self.ctx.get("history") or []), row],
               "latest_results": v.get("results_path") or self.ctx.get("latest_results"),
               "line": str(d["reason"]) + "".join(f"; goal {g}" for g in glines)}
        if met:
            out["stop"] = f"goal met: {', '.join(self.o.goals)}"
        return out

    # -- 8 LEARN -------------------------------------------------------------------------------
    def step_learn(self, i: int, key: str) -> dict[str, Any]:
        assert self.state is not None
        current_before = self.ctx["history"][-1]["parent"]
        new = self.ctx["new_version"]
        d = self.ctx["decision"]
        summary = self.ctx.get("summary", {})
        changes = list(summary.get("changes", []))
        uniq = learn.unique_by_entry(self.ctx.get("planned", []))
        planned = [p for p in uniq if p.get("entry")]
        metrics = self.ctx.get("profiles_by_version", {}).get(new, {})
        metrics = {t: self._metrics(c) for t, c in metrics.items()}
        results = self._results(self.ctx["verify"].get("results_path")) or {}
        _par, parent_config = literal_config(version_path(self.o.kernels_dir / self.o.kernel, current_before))  # type: ignore[operator]
        updates = learn.learn(self.kb, kernel=self.o.kernel, parent=current_before, new=new,
                              language=self.ctx["design_language"], decision=d,
                              planned=[{"name": p["entry"], "title": p["name"]} for p in planned], changes=changes,
                              metrics=self.ctx.get("metrics", {}), parent_config=parent_config,
                              gpu=str(results.get("gpu") or "GPU"))
        # Why/Prediction name the entries the designer applied (each once), not every planned one
        applied = learn.applied_entries([(p["entry"], p["name"]) for p in planned], changes)
        why_src = [p for p in planned if p["entry"] in applied] or [p for p in uniq if not p.get("entry")] or uniq
        rationale = [p["rationale"] + "." for p in why_src]
        skipped = [p["entry"] for p in planned if p["entry"] not in applied]
        if skipped and applied:
            rationale.append(f"Planned but not applied by the designer: {', '.join(skipped)}.")
        elif planned and not applied:
            rationale.append("The designer's summary names none of these entries, so LEARN updated none of them.")
        gains = [f"{t} {v['gain_pct']:+.1f}%" for t, v in d.get("per_trial", {}).items()]
        est = ", ".join(f"{p['name']}: {p['rationale'].split('est. ')[-1]}" for p in why_src if p.get("entry")) \
            or "a gain beyond noise"
        # the designer's own prediction (its version file) beside the task's estimate: predicted vs measured
        own = learn.designer_prediction(version_path(self.o.kernels_dir / self.o.kernel, new))  # type: ignore[operator]
        prediction = (f"designer: {own} Task estimate: {est}" if own else f"task estimate: {est}") + \
            f"; measured (gain) {', '.join(gains) or 'n/a'}"
        entry = learn.devlog_entry(
            new=new, parent=current_before, language=self.ctx["design_language"], changes=changes,
            rationale=rationale, prediction=prediction, decision=d,
            rows=rows_by_trial(results, new), metrics=metrics, command=self.ctx["verify"].get("command", ""),
            run_id=self.state.run_id)
        learn.append_devlog_entry(self.devlog, entry)
        return {"learned": updates, "line": f"devlog entry for {new}; knowledge: {'; '.join(updates)}"}


def _us(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, (int, float)) else str(v)
