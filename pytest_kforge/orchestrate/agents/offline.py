"""Offline agents: deterministic, rule-based, no network (the default without ANTHROPIC_API_KEY).

Profiler: reads ``reports/<kernel>/<version>/<trial>.json.gz`` (the profile contract's JSON twin);
when it is missing and a GPU with ncu is here it runs the profiling command first; otherwise it
derives a one-stage contract from the suite results JSON and says so in the root cause.

Designer: applies catalog transformations that are expressible as CONFIG changes (tile sizes,
split count, pipeline depth, occupancy/latency hints, DSL options).  It writes a REAL version file
``kernels/<kernel>/v<N+1>.py`` that imports the parent module and overrides CONFIG, PARENT and
DESCRIPTION (chosen over copying so a new version is a reviewable ten-line diff and a fix to the
parent's code is not silently forked).  LANGUAGE is the parent's.  The parent's ``run`` must read
its tunables from the ``config`` argument (the registry passes the merged CONFIG there).

Tuning-space policy (seed): manual promising tiles first -- the designer tries the catalog's
suggested change, then the next untried value from a short hand-picked candidate list per knob;
it never enumerates a grid.  Coarse autotuning belongs to the loop and is time-boxed there
(``--autotune-budget``); see the 10,000-config cautionary example in ``loop.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from ...registry import version_path, versions_dir
from ...spec import Roofline
from .. import compat
from ..select import control_level
from .base import AgentContext, DesignImpossible, clean

__all__ = ["KNOBS", "OfflineProfiler", "OfflineDesigner", "contract_from_results", "propose_config",
           "render_version_module", "tried_configs", "next_version_name", "literal_language",
           "metrics_from_contract", "parse_change",
           "knob_off", "knob_serves", "literal_config"]

#: knob family -> (key pattern, hand-picked promising values in order, catalog-name pattern).
#: Order matters: with no catalog match the designer walks the families in this order (split and
#: latency knobs first -- cheap and usually safe for decode attention; bigger tiles last, since they
#: cost registers).  A knob whose value is None means "chosen automatically by the version".
KNOBS: dict[str, tuple[str, tuple[Any, ...], str]] = {
    "split": (r"split", (2, 4, 8, 16, 32), r"split|occupancy|parallel|wave"),
    "waves": (r"^waves$", (2.0, 0.5, 1.5), r"split|wave|occupancy|balance"),
    "latency": (r"latency", (4, 2, 8), r"latency|prefetch|pipelin|overlap"),
    "occupancy": (r"occupancy", (2, 1, 4), r"occupancy|latency"),
    "stages": (r"stage|pipeline|prefetch|buffers", (2, 3, 4), r"pipelin|stage|latency|prefetch|overlap"),
    "pages": (r"min_?pages", (2, 8), r"split|balance"),
    "tile_n": (r"block_?n|tile_?n|block_?kv|tile_?kv", (64, 128, 32, 256), r"tile|block|reuse|occupancy"),
    "warps": (r"num_?(worker_)?warps|warps", (4, 8), r"occupancy|latency|warp"),
    # threads per CTA of a row-per-CTA kernel (rmsnorm_fp8's CuTe versions): more threads, fewer loads each
    "threads": (r"^(num_?)?threads$", (256, 512, 64), r"occupancy|latency|parallel|thread"),
    "tile_m": (r"block_?m|tile_?m|block_?h|tile_?h", (64, 128, 32), r"tile|block|reuse"),
}


MANUAL = "manual promising tile"


def _ordered(values: tuple[Any, ...], current: Any) -> list[Any]:
    """The next larger hand-picked values first (more parallelism, bigger tiles), then smaller ones."""
    if current is None:
        return list(values)
    return sorted(v for v in values if v > current) + sorted((v for v in values if v < current), reverse=True)


def _tunable(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def contract_from_results(kernel: str, version: str, trial: str, params: dict[str, int],
                          results: dict[str, Any] | None, matches: list[dict[str, Any]]) -> Any:
    """A one-stage ProfileContract from a suite results row (used when ncu is not available)."""
    C = compat.contracts
    row = next((r for r in (results or {}).get("results", [])
                if r.get("version") == version and r.get("trial") == trial), None)
    if row is None or row.get("median_us") is None:
        raise DesignImpossible(f"no profile report and no measured results for {kernel} {version} {trial}; "
                               f"run the suite once (python -m pytest --kernel {kernel} --kernel-version {version} "
                               f"--kforge-json results.json) or profile it on a GPU")
    default = Roofline()  # the run's own ceilings when it recorded them, else the stated default
    roof = (results or {}).get("roofline") or {}
    dram = 100.0 * float(row.get("gbps") or 0.0) / (1000.0 * float(roof.get("tbs", default.bandwidth_bytes_per_s / 1e12)))
    tc = 100.0 * float(row.get("tflops") or 0.0) / float(roof.get("tflops", default.flops_per_s / 1e12))
    bound = "Latency" if max(dram, tc) < 40.0 else ("Memory" if dram >= tc else "Compute")
    issue = {"Memory": "DRAM traffic sets the time", "Compute": "tensor pipe sets the time",
             "Latency": "neither DRAM nor tensor pipe is busy"}[bound]
    stage = C.StageRow("kernel (all launches)", float(row["median_us"]), round(tc, 1), round(dram, 1), None, bound,
                       issue)
    opps = [C.Opportunity(clean(m["title"]), m["est_gain_pct"], clean(m["trigger"] or "derived"),
                          clean(m["path"] or m["name"])) for m in matches[:3]]
    root = (f"Derived from the suite timing ({row['median_us']:.1f} us, {row.get('pct_floor', 0) or 0:.1f}% of the "
            f"roofline floor), not from ncu counters, which were not available here. {issue.capitalize()}: "
            f"DRAM at {dram:.0f}% and tensor pipe at {tc:.0f}% of peak.")
    return C.ProfileContract(kernel, version, dict(params or row.get("params", {})), [stage], bound, root, opps, [])


def metrics_from_contract(contract: Any) -> dict[str, float]:
    """Duration-weighted metrics of a contract's stages, in the profiler's short names.

    A report JSON twin may carry the raw metrics (``metrics``); those are used as they are.
    """
    raw = getattr(contract, "metrics", None)
    if isinstance(raw, dict) and raw:
        return {k: float(v) for k, v in raw.items() if isinstance(v, (int, float))}
    stages = list(getattr(contract, "stages", []) or [])
    total = sum(float(s.duration_us) for s in stages)
    out = {"duration_us": round(total, 3), "num_launches": float(len(stages))}
    for attr, short in (("dram_pct", "dram_pct"), ("tc_pct", "tensor_pct"), ("occ_pct", "achieved_occupancy_pct")):
        known = [(float(getattr(s, attr)), float(s.duration_us)) for s in stages if getattr(s, attr) is not None]
        weight = sum(d for _v, d in known)
        if known and weight > 0:
            out[short] = round(sum(v * d for v, d in known) / weight, 2)
    return out


class OfflineProfiler:
    name = "offline"

    def profile(self, kernel: str, version: str, trial: str, params: dict[str, int], *,
                context: AgentContext) -> Any:
        from pytest_kforge.profile.report import load_report_json, report_json_path

        reports = context.reports_dir or (context.root / "reports")
        path = report_json_path(reports / kernel / version, trial)
        from pytest_kforge import artifacts

        if not artifacts.exists(path) and context.can_profile and context.runner is not None:
            # every trial of the step still unprofiled, in one run: one start-up and compile, not one per trial
            todo = tuple(t for t in context.trials
                         if not artifacts.exists(report_json_path(reports / kernel / version, t)))
            out = context.runner.profile(kernel, version, out_dir=reports, timeout_s=context.timeout_s,
                                         trials=todo if trial in todo else (trial,))
            context.exchange.setdefault("commands", []).append(out.command)
            if not out.ok:
                context.notes.append(f"profiling {version} {trial} failed ({out.reason}); using suite timings")
        data = load_report_json(path)  # the same path the profiling, if it ran, just wrote
        if data is not None:
            from ..suite import contract_from_report

            context.exchange.setdefault("sources", []).append(str(path))
            if data.get("gpu"):  # a committed report may come from another card than the one VERIFY runs on
                context.exchange[CAPTURED_ON] = data["gpu"]
                context.notes.append(f"{version} {trial}: {CAPTURED_ON} {data['gpu']}")
            return contract_from_report(data)
        context.notes.append(f"{version} {trial}: no ncu report; contract derived from the suite results JSON")
        context.exchange.setdefault("sources", []).append("suite results JSON")
        draft = contract_from_results(kernel, version, trial, params, context.results, [])
        matches = context.matches
        if not matches and context.knowledge is not None:
            metrics = metrics_from_contract(draft)
            matches = [compat.match_fields(m) for m in context.knowledge.match(metrics, kernel_tags=(kernel,))]
        return contract_from_results(kernel, version, trial, params, context.results, matches)


#: the exchange key (and note) of a report read from disk: the card it was captured on; PROFILE's line names it
CAPTURED_ON = "counters captured on"


def _family(key: str) -> str | None:
    for fam, (pat, _vals, _cat) in KNOBS.items():
        if re.search(pat, key.lower(), re.I):
            return fam
    return None


_CHANGE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.+?)\s*->\s*(.+?)\s*(?:\((.*)\))?\s*$")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_change(line: str) -> tuple[str, Any, Any, str] | None:
    """``(key, old, new, label)`` of a CONFIG change line as the designer writes it
    (``"NUM_SPLITS: None -> 2 (split-kv-combine)"``); None for a free-text change."""
    m = _CHANGE_RE.match(line)
    if not m or " " in m.group(2).strip() and not m.group(2).strip().startswith(("'", '"')):
        return None
    return m.group(1), _literal(m.group(2)), _literal(m.group(3)), (m.group(4) or "").strip()


def knob_off(value: Any) -> bool:
    """A knob value that switches its technique off: 0, 1 (one split, one stage), False, "off".

    None is NOT off: by the convention above it means "chosen automatically by the version", so a
    parent with None may already use the technique (v5's ``NUM_SPLITS: None`` splits decode in 2)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value in (0, 1)
    return isinstance(value, str) and value.strip().lower() in ("off", "none", "false", "0", "1", "")


def knob_serves(key: str, text: str) -> bool:
    """Whether CONFIG key ``key`` is the knob of the technique named/described by ``text``."""
    fam = _family(key)
    return fam is not None and bool(re.search(KNOBS[fam][2], text, re.I))


def propose_config(parent: dict[str, Any], planned: list[dict[str, Any]], tried: list[dict[str, Any]]
                   ) -> tuple[dict[str, Any], list[str]] | None:
    """The next untried CONFIG and the list of changes, or None when nothing applies.

    Planned optimisations (catalog matches, best first) pick the knob families; an entry may also
    carry an explicit ``config`` suggestion.  For each family, the next value of its hand-picked
    list (larger values first) that no existing version has is used: one knob per version,
    so each measured result is attributable to one change.
    """
    seen = [{**parent, **t} for t in tried]
    for opt in planned:
        if str(opt.get("name", "")).startswith(MANUAL):
            continue  # the loop's placeholder when no catalog entry matched: handled below
        if control_level(opt.get("name", ""), opt.get("languages", ())) == "cute":
            continue  # not expressible as a CONFIG change
        suggestion = {k: v for k, v in (opt.get("config") or {}).items() if k in parent and parent[k] != v}
        if suggestion and {**parent, **suggestion} not in seen:
            return {**parent, **suggestion}, [f"{k}: {parent[k]} -> {v} ({opt['name']})" for k, v in suggestion.items()]
        text = f"{opt.get('name', '')} {opt.get('title', '')}"
        for key, value in parent.items():
            fam = _family(key)
            if fam is None or not _tunable(value):
                continue
            if not re.search(KNOBS[fam][2], text, re.I):
                continue
            for cand in _ordered(KNOBS[fam][1], value):
                new = {**parent, key: cand}
                if cand != value and new not in seen:
                    return new, [f"{key}: {value} -> {cand} ({opt['name']})"]
    # No catalog entry maps to a knob: manual promising tiles, one knob at a time, in KNOBS order.
    for fam, (_pat, values, _cat) in KNOBS.items():
        for key, value in parent.items():
            if _family(key) != fam or not _tunable(value):
                continue
            for cand in _ordered(values, value):
                new = {**parent, key: cand}
                if cand != value and new not in seen:
                    return new, [f"{key}: {value} -> {cand} (manual promising tile, no catalog match)"]
    return None


def render_version_module(kernel: str, name: str, parent: str, language: str, description: str,
                          config: dict[str, Any], changes: list[str]) -> str:
    cfg = ",\n".join(f"    {k!r}: {v!r}" for k, v in config.items())
    why = "\n".join(f"#   {c}" for c in changes)
    return f'''"""{name}: {description}"""

# Generated by the kforge offline designer from {parent}; changes:
{why}
from __future__ import annotations

from typing import Any

from kforge_kernels.{kernel} import {parent} as _parent

LANGUAGE = {language!r}
PARENT = {parent!r}
DESCRIPTION = {description!r}
# a CONFIG child applies what its parent applies (the profiler leaves those entries out of its opportunities)
FEATURES = tuple(getattr(_parent, "FEATURES", None) or ())
CONFIG: dict[str, Any] = {{
{cfg},
}}


def run(*args: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    cfg = dict(CONFIG)
    cfg.update(config or {{}})
    return _parent.run(*args, config=cfg, **kwargs)


if hasattr(_parent, "supports"):
    supports = _parent.supports
if hasattr(_parent, "prepare"):  # the harness passes this CONFIG, so the parent's prepare compiles this version
    prepare = _parent.prepare
'''


def literal_config(path: Path) -> tuple[str | None, dict[str, Any]]:
    """PARENT and CONFIG of a version file read statically (no import: siblings may need a GPU DSL)."""
    parent, config = None, {}
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None, {}
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if not isinstance(target, ast.Name):
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        if target.id == "PARENT":
            parent = value
        elif target.id == "CONFIG" and isinstance(value, dict):
            config = value
    return parent, config


def tried_configs(kernel_dir: Path, exclude: str = "") -> list[dict[str, Any]]:
    """Every existing version's CONFIG counts as tried: never re-create a sibling or an ancestor."""
    return [cfg for p in sorted(versions_dir(kernel_dir).glob("v*.py")) for _par, cfg in [literal_config(p)]
            if p.stem != exclude and cfg]


def literal_language(path: Path) -> str | None:
    """A version file's LANGUAGE read statically (no import)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LANGUAGE" for t in node.targets) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


_NAME_RE = re.compile(r"^v(\d+)(_[a-z0-9_]+)?$")


def next_version_name(kernel_dir: Path, language: str | None = None) -> str:
    """The next version name in ``language``'s line: its versions' usual suffix (mla: ``_cute`` for
    cute-dsl, none for cutile-dsl) and one more than that line's highest number (``v60_cute`` ->
    ``v61_cute``, ``v11`` -> ``v12``).  Without ``language``, or with no version in it yet: one more
    than the highest number of any version, unsuffixed."""
    names = [(p, m) for p in versions_dir(kernel_dir).glob("v*.py") if (m := _NAME_RE.match(p.stem))]
    suffix = None
    if language:
        found = [m.group(2) or "" for p, m in names if literal_language(p) == language]
        suffix = max(set(found), key=found.count) if found else None
    if suffix is None:
        return f"v{max((int(m.group(1)) for _p, m in names), default=0) + 1}"
    line = [int(m.group(1)) for _p, m in names if (m.group(2) or "") == suffix]
    return f"v{max(line, default=0) + 1}{suffix}"


class OfflineDesigner:
    name = "offline"

    def design(self, task: Any, *, context: AgentContext) -> Any:
        C = compat.contracts
        kdir = context.kernels_dir / task.kernel
        from ...registry import Registry

        parent = Registry(context.kernels_dir).kernel(task.kernel).version(task.current)
        tried = tried_configs(kdir, exclude=task.new_version)
        planned, seen = [], set()
        for o in task.optimizations:  # one entry planned twice (by title and by name) is tried once
            m = next((m for m in context.matches if m["name"] == o.name or m["title"] == o.name), {})
            if m.get("name", o.name) in seen:
                continue
            seen.add(m.get("name", o.name))
            planned.append({"name": o.name, "title": m.get("title", o.name), "config": m.get("config", {}),
                            "languages": m.get("languages", [])})
        proposal = propose_config(parent.config, planned, tried)
        if proposal is None:
            raise DesignImpossible(
                f"the offline designer has no untried CONFIG change for {task.kernel} {task.current} "
                f"(CONFIG keys: {', '.join(parent.config) or 'none'}); start from a DSL version with tunables "
                f"(--from) or use --agents anthropic")
        config, changes = proposal
        desc = f"{parent.description.split(' [')[0]} [{'; '.join(c.split(' (')[0] for c in changes)}]"
        guard = compat.PathGuard(context.root, allowed=(f"{context.kernels_dir.relative_to(context.root)}/"
                                                        f"{task.kernel}/", "docs/")) \
            if context.kernels_dir.is_relative_to(context.root) else None
        rel = version_path(kdir, task.new_version).relative_to(kdir).as_posix()
        target = guard.resolve_for_write(str((kdir / rel).relative_to(context.root))) if guard else kdir / rel
        from ...fsutil import atomic_write_text

        atomic_write_text(target, render_version_module(task.kernel, task.new_version, task.current,
                                                        parent.language, desc, config, changes))
        context.exchange["file"] = str(target)
        context.exchange["changes"] = changes
        # The designer only proves the file imports as a version of the kernel; correctness and speed
        # are VERIFY's job (the loop never trusts a designer's PASS).
        try:
            Registry(context.kernels_dir).kernel(task.kernel).version(task.new_version)
            correctness = "PASS"
        except Exception as exc:  # noqa: BLE001 - any import failure is a FAIL with its reason
            correctness = "FAIL"
            context.notes.append(f"{task.new_version} does not import: {exc}")
        trials = [C.TrialCheck(32, 1, 4096, "decode: the memory-bound single-query case"),
                  C.TrialCheck(32, 16, 4096, "spec: 16 queries share each KV read, the compute-heavier case")]
        rel_target = str(target.relative_to(context.root)) if target.is_relative_to(context.root) else str(target)
        return C.NewVersionSummary(task.kernel, task.new_version, changes, [rel_target], [], correctness, trials,
                                   f"docs/kernels/{task.kernel}.md")
