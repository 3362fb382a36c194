"""The profile contract: from ncu records to ``reports/<kernel>/<version>/<trial>.md`` + ``.json.gz``.

:func:`build_report` is pure (records in, :class:`ProfileReport` out) so golden tests run on CPU
from recorded CSVs.  The markdown is :class:`pytest_kforge.contracts.ProfileContract` rendered in
the workflow's shape; the JSON twin adds what a reader needs to check it: every stage's metrics
and the ncu metric each value came from, the rule that fired, the roofline position, notes.  The twin
is stored gzipped (``<trial>.json.gz``: a tenth of the bytes, and a project keeps one per version and
trial); :func:`load_report_json` reads either form, so twins written as plain ``<trial>.json`` by
older versions (or by hand, in tests) still count.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .derive import derive, derived_metrics, is_derived
from .parse import KernelRecord
from .rules import Verdict, aggregate, classify, key_issue, root_cause

__all__ = ["ProfileReport", "stage_name", "build_report", "baseline_rows", "knowledge_opportunities",
           "drop_applied", "write_report", "report_json_path", "load_report_json", "perf_block"]

#: metrics compared in "vs Baseline": (short name, unit, percentage-point change?)
BASELINE_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("duration_us", "us", False), ("pct_floor", "%", True), ("dram_pct", "%", True), ("tensor_pct", "%", True),
    ("achieved_occupancy_pct", "%", True), ("dram_read_mb", "MB", False), ("num_launches", "", False),
)


@dataclasses.dataclass
class ProfileReport:
    """A rendered profile: the contract, its markdown, and the JSON twin."""

    contract: Any  # pytest_kforge.contracts.ProfileContract
    data: dict[str, Any]

    @property
    def markdown(self) -> str:
        """The contract's markdown; an empty opportunity list gets one un-numbered "(none: why)"
        line so a reader knows it is empty on purpose, and matches dropped because the version
        already applies them one "(not ranked, already applied: ...)" line after the ranked ones
        (parsers skip un-numbered lines)."""
        text = self.contract.render()
        head = "### Top 3 Opportunities (ranked by estimated impact)\n"
        before, sep, after = text.partition(head)
        lines = after.split("\n")
        n = len(self.contract.opportunities)
        if not n:
            why = next((t for t in self.data.get("notes", []) if t.startswith("no ")), "no entry matched")
            lines.insert(0, f"(none: {why})")
            n = 1
        applied = self.data.get("already_applied") or []
        if applied:
            lines.insert(n, "(not ranked, already applied: " + "; ".join(f"{a['name']}, {a['why']}"
                                                                        for a in applied) + ")")
        evidence = {d["name"]: d["evidence"] for d in self.data.get("derived") or []}
        for i in reversed(range(min(n, len(self.contract.opportunities)))):  # under its item, bottom up
            name = self.contract.opportunities[i].name
            if name in evidence and is_derived(self.contract.opportunities[i].entry):
                lines.insert(i + 1, f"   - evidence: {evidence[name]}")
        return before + sep + "\n".join(lines)


_NOISE = re.compile(r"^(void|static|__global__)\s+")
_CUTILE_MANGLING = re.compile(r"_Kt\d+_A\d.*$")


def stage_name(kernel_name: str, stage_names: Mapping[str, str] | None = None) -> str:
    """A readable stage name: the version's ``STAGE_NAMES`` substring map first, else the kernel's
    function name without return type, namespaces and template arguments (at most 48 chars)."""
    for sub, friendly in (stage_names or {}).items():
        if sub in kernel_name:
            return friendly
    name = _NOISE.sub("", kernel_name.strip())
    depth, out = 0, []
    for ch in name:  # drop <...> and (...) contents
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    base = "".join(out).strip().split("::")[-1].strip() or kernel_name.strip()
    base = _CUTILE_MANGLING.sub("", base) or base  # cuTile appends the argument signature
    return base if len(base) <= 48 else base[:45] + "..."


def _round(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


def knowledge_opportunities(metrics: Mapping[str, float], *, kernel_tags: Sequence[str], language: str | None,
                            root: str | Path = "docs/knowledge", limit: int | None = 3) -> tuple[list[Any], list[str]]:
    """Top ``limit`` (None: all) :class:`Opportunity` from the knowledge base at ``root``, ranked
    by est. gain, and notes.

    Each opportunity's ``entry`` is the entry file relative to the project (``root``'s grandparent).
    """
    from pytest_kforge.contracts import Opportunity

    try:
        from pytest_kforge.knowledge import KnowledgeBase
    except ImportError as exc:
        return [], [f"no opportunities: the knowledge base module is not importable ({exc}); "
                    f"install pytest_kforge.knowledge to get ranked opportunities"]
    try:
        kb = KnowledgeBase(root=root)
        try:  # opportunities are optimisations; anti-patterns are not things to apply
            matches = kb.match(dict(metrics), kernel_tags=tuple(kernel_tags), language=language,
                               kinds=("optimization",))
        except TypeError:
            matches = kb.match(dict(metrics), kernel_tags=tuple(kernel_tags), language=language)
    except Exception as exc:  # noqa: BLE001 - a broken entry must not lose the profile
        return [], [f"no opportunities: the knowledge base at {root} failed to match ({type(exc).__name__}: {exc})"]
    opps = []
    for m in sorted(matches, key=lambda m: -float(m.est_gain_pct)):
        entry = m.entry
        name = str(getattr(entry, "name", None) or getattr(entry, "title", None) or entry)
        path = getattr(entry, "path", None)
        ref = str(path) if path is not None else str(getattr(entry, "slug", "") or "")
        try:
            rel = str(Path(ref).resolve().relative_to(Path(root).resolve().parent.parent)) if ref else ""
        except ValueError:
            rel = ref
        opps.append(Opportunity(name.replace("--", "-"), round(float(m.est_gain_pct), 1),
                                str(m.trigger).replace("--", "-"), rel.replace("--", "-")))
        if limit is not None and len(opps) == limit:
            break
    notes = [] if opps else [f"no knowledge-base entry under {root} matches these metrics"]
    return opps, notes


def _entry_names(root: str | Path) -> set[str]:
    """Names of every entry under ``root`` (empty when the knowledge base does not load)."""
    try:
        from pytest_kforge.knowledge import KnowledgeBase

        return {e.name for e in KnowledgeBase(root=root).entries()}
    except Exception:  # noqa: BLE001 - no knowledge base: nothing is known
        return set()


def drop_applied(opps: Sequence[Any], applied: Mapping[str, str]) -> tuple[list[Any], list[dict[str, str]]]:
    """``(kept, dropped)``: opportunities whose name is not in ``applied`` (``{feature: why}``, see
    :mod:`.features`), and one ``{name, why, trigger}`` for each dropped one."""
    kept, dropped = [], []
    for o in opps:
        if o.name in applied:
            dropped.append({"name": o.name, "why": applied[o.name], "trigger": o.trigger})
        else:
            kept.append(o)
    return kept, dropped


def baseline_rows(current: Mapping[str, float], previous: Mapping[str, float]) -> list[Any]:
    """vs Baseline rows: relative change for times/bytes/counts, percentage points for percentages."""
    from pytest_kforge.contracts import BaselineRow

    rows = []
    for key, unit, pp in BASELINE_METRICS:
        if key not in current or key not in previous:
            continue
        cur, prev = float(current[key]), float(previous[key])
        if pp:
            rows.append(BaselineRow(key, f"{prev:.1f}%", f"{cur:.1f}%", f"{cur - prev:+.1f} pp"))
        else:
            rows.append(BaselineRow.from_values(key, prev, cur, unit))
    return rows


def build_report(kernel: str, version: str, trial: str, params: Mapping[str, int], records: Sequence[KernelRecord],
                 *, flops: float | None = None, min_bytes: float | None = None, roofline: Any = None,
                 stage_names: Mapping[str, str] | None = None, language: str | None = None,
                 baseline: Mapping[str, Any] | None = None, opportunities: Callable[..., tuple[list, list]] | None
                 = None, extra: Mapping[str, Any] | None = None,
                 knowledge_root: str | Path = "docs/knowledge",
                 applied: Mapping[str, str] | None = None,
                 peers: Mapping[str, Sequence[KernelRecord]] | None = None,
                 derive_opportunities: bool = True, kernel_tags: Sequence[str] | None = None) -> ProfileReport:
    """Everything but I/O: stages, the verdict, root cause, opportunities, baseline, JSON twin.

    ``baseline`` is the parent's JSON twin (as :func:`load_report_json` returns it).
    ``opportunities(metrics, kernel_tags=..., language=...)`` defaults to the knowledge base.
    ``applied`` is ``{feature: why}`` of what the version already does (:mod:`.features`): such
    opportunities are not ranked; the JSON's ``already_applied`` and a markdown line name them.
    When fewer than three remain, :func:`.derive.derive` fills the list from the counters (marked
    as not in the knowledge base, each with its evidence line; ``derive_opportunities=False`` turns
    that off); ``peers`` are ``{name: records}``
    of peer kernels profiled in the same capture, for the gap to the best of them.  ``kernel_tags`` (the kernel's
    name and its spec's tags, :func:`pytest_kforge.registry.kernel_tags`) select the entries that apply.
    """
    from pytest_kforge.contracts import ProfileContract, StageRow

    from pytest_kforge.spec import Roofline

    if not records:
        raise ValueError(f"no kernel records for {kernel} {version} {trial}; nothing was profiled")
    roof = roofline or Roofline()
    stages_m = [dict(r.metrics) for r in records]
    agg = aggregate(stages_m)
    notes: list[str] = []
    bound = None
    if flops is not None and min_bytes is not None:
        bound = roof.bound(flops, min_bytes)
        floor_us = roof.floor_s(flops, min_bytes) * 1e6
        if agg.get("duration_us"):
            agg["pct_floor"] = floor_us / agg["duration_us"] * 100.0
        moved = (agg.get("dram_read_mb", 0.0) + agg.get("dram_write_mb", 0.0)) * 1e6
        if moved > 0:
            agg["arith_intensity"] = flops / moved
    agg.update(derived_metrics(records, agg, min_bytes=min_bytes, peers=peers))
    total = agg.get("duration_us", 0.0) or 1.0
    rows, stage_data = [], []
    seen: dict[str, int] = {}
    for rec, m in zip(records, stages_m):
        v = classify(m)
        name = stage_name(rec.name, stage_names)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name} #{seen[name]}"
        rows.append(StageRow(name, _round(m.get("duration_us", 0.0), 2) or 0.0, _round(m.get("tensor_pct")),
                             _round(m.get("dram_pct")), _round(m.get("achieved_occupancy_pct")), v.kind,
                             key_issue(m, v)))
        stage_data.append({"stage": name, "kernel_name": rec.name, "grid": rec.grid, "block": rec.block,
                           "share_pct": round(m.get("duration_us", 0.0) / total * 100, 1),
                           "verdict": dataclasses.asdict(v), "metrics": {k: round(x, 4) for k, x in m.items()},
                           "sources": rec.sources})
    verdict: Verdict = classify(agg, roofline_bound=bound)
    dom = max(range(len(records)), key=lambda i: stages_m[i].get("duration_us", 0.0))
    share = stages_m[dom].get("duration_us", 0.0) / total * 100
    cause = root_cause(agg, verdict, dominant=rows[dom].stage if len(rows) > 1 else "", dominant_share=share)
    trigger_metrics = {k: round(x, 4) for k, x in agg.items()}
    find = opportunities or (lambda m, **kw: knowledge_opportunities(m, root=knowledge_root, limit=None, **kw))
    # A torch version is the reference; its successor is written in a DSL, so every DSL's entries
    # apply (on the real H200 capture, language="torch" matched no entry at all for mla v0).
    kb_language = None if language == "torch" else language
    opps, opp_notes = find(trigger_metrics, kernel_tags=tuple(kernel_tags or (kernel,)), language=kb_language)
    notes += opp_notes
    opps, dropped = drop_applied(opps, applied or {})
    opps = opps[:3]
    if dropped and not opps:
        notes.append("no entry left to rank: every match is already applied by this version")
    derived = derive(trigger_metrics, records, peers=peers, min_bytes=min_bytes, bandwidth=roof.bandwidth_bytes_per_s)
    # a name the knowledge base already has (an anti-pattern, say) is its verdict, not a new idea
    known = {o.name for o in opps} | set(applied or {}) | (set() if opportunities else _entry_names(knowledge_root))
    fill = [d for d in derived if d.name not in known][:max(0, 3 - len(opps))] if derive_opportunities else []
    if fill:
        opps = sorted([*opps, *(d.opportunity() for d in fill)], key=lambda o: -float(o.est_gain_pct))
        notes.append(f"{len(fill)} opportunit{'y' if len(fill) == 1 else 'ies'} derived from the counters "
                     f"(not in the knowledge base): {', '.join(d.name for d in fill)}")
    if not any(k.startswith("stall_") for k in trigger_metrics):
        notes.append("stall reasons not in this capture (smsp__average_warps_issue_stalled_*); "
                     "`python -m pytest_kforge.profile.side` collects them with `ncu --set full`")
    base_rows = []
    if baseline:
        base_rows = baseline_rows(agg, baseline.get("metrics", {}))
        notes.append(f"baseline: {baseline.get('version')} ({baseline.get('trial')})")
    contract = ProfileContract(kernel, version, {k: int(v) for k, v in params.items()}, rows, verdict.kind,
                               cause, list(opps), base_rows)
    data = {
        "kernel": kernel, "version": version, "trial": trial, "params": dict(params), "language": language,
        "contract": contract.to_dict(), "metrics": trigger_metrics, "verdict": dataclasses.asdict(verdict),
        "roofline": {"flops": flops, "min_bytes": min_bytes, "bound": bound,
                     "floor_us": round(roof.floor_s(flops, min_bytes) * 1e6, 3) if flops and min_bytes else None,
                     "tbs": roof.bandwidth_bytes_per_s / 1e12, "tflops": roof.flops_per_s / 1e12},
        "stages": stage_data, "notes": notes, **dict(extra or {}),
    }
    if derived:
        data["derived"] = [dataclasses.asdict(d) for d in derived]
    if applied:
        data["features"] = dict(applied)
        data["already_applied"] = dropped
    return ProfileReport(contract, data)


def report_json_path(out_dir: str | Path, trial: str) -> Path:
    """Where ``trial``'s JSON twin lies in ``out_dir``: ``<trial>.json.gz``, else an older plain
    ``<trial>.json``; the ``.json.gz`` path (where :func:`write_report` writes) when neither exists."""
    gz = Path(out_dir) / f"{trial}.json.gz"
    plain = gz.with_suffix("")
    return plain if plain.exists() and not gz.exists() else gz


def write_report(report: ProfileReport, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``<out_dir>/<trial>.md`` and ``<trial>.json.gz`` atomically; returns both paths.

    The gzip header carries no timestamp, so the same report gives the same bytes; a plain
    ``<trial>.json`` left by an older version is removed (it would shadow nothing, but mislead a reader).
    """
    from pytest_kforge.fsutil import atomic_write_gz_text, atomic_write_text

    out = Path(out_dir)
    trial = report.data["trial"]
    md, js = out / f"{trial}.md", out / f"{trial}.json.gz"
    atomic_write_text(md, report.markdown)
    atomic_write_gz_text(js, json.dumps(report.data, indent=1, sort_keys=False) + "\n")
    (out / f"{trial}.json").unlink(missing_ok=True)
    return md, js


def load_report_json(path: str | Path) -> dict[str, Any] | None:
    """A report's JSON twin from ``path`` (``.json`` or ``.json.gz``); a ``<trial>.json`` path that does not
    exist falls back to its ``.json.gz`` sibling.  None when neither exists or the file does not parse."""
    import gzip

    from pytest_kforge import artifacts

    p = Path(path)
    if not artifacts.exists(p) and p.suffix == ".json":
        p = p.with_name(p.name + ".gz")
    if not artifacts.exists(p):
        return None
    try:
        raw = artifacts.read_bytes(p)  # loose, or packed in a reports archive (the README's artifact policy)
        return json.loads(gzip.decompress(raw) if p.name.endswith(".gz") else raw)
    except (OSError, ValueError, EOFError):
        return None


def _whole(m: dict, key: str) -> str:
    """Metric ``key`` rounded to a whole number for the perf block, or "n/a" when the report lacks it."""
    return f"{m[key]:.0f}" if isinstance(m.get(key), (int, float)) else "n/a"


def perf_block(reports_dir: str | Path, kernel: str, *, link_base: str = "../../reports") -> str:
    """The devlog's ``perf`` block: one row per saved profile of ``kernel`` (newest data wins).

    Besides the card the counters come from (rows may mix cards), time, floor and verdict each row carries the
    counters a reviewer checks first: tensor pipe, DRAM and achieved occupancy (% of peak, weighted by stage
    time), registers per thread (of the longest stage) and local-memory bytes (spills; summed over the stages),
    as :func:`pytest_kforge.profile.rules.aggregate` made them.
    """
    from pytest_kforge.registry import version_sort_key

    root = Path(reports_dir) / kernel
    rows = []
    from pytest_kforge import artifacts

    twins = {(p.parent.name, p.name.split(".")[0]): p for p in root.glob("*/*.json")}
    twins.update({(p.parent.name, p.name.split(".")[0]): p for p in artifacts.glob(root, "*/*.json.gz")})  # gz wins
    for key in sorted(twins, key=lambda k: (version_sort_key(k[0]), k[1])):
        d = load_report_json(twins[key])
        if not d or "contract" not in d:
            continue
        m = d.get("metrics", {})
        opps = d["contract"].get("opportunities") or []
        top = f"{opps[0]['name']} (est. {opps[0]['est_gain_pct']:g}%)" if opps else "none matched"
        pf = f"{m['pct_floor']:.0f}%" if "pct_floor" in m else "n/a"
        counters = " | ".join(_whole(m, k) for k in ("tensor_pct", "dram_pct", "achieved_occupancy_pct",
                                                      "registers_per_thread", "local_spill_bytes"))
        card = str(d.get("gpu") or "-").removeprefix("NVIDIA ")  # the capture's card: rows may mix cards
        rows.append(f"| {d['version']} | {d['trial']} | {card} | {m.get('duration_us', 0):.1f} | {pf} | {counters} | "
                    f"{d['contract']['bottleneck']}-bound | {top} | "
                    f"[{d['trial']}]({link_base}/{kernel}/{d['version']}/{d['trial']}.md) |")
    head = ["### Profiles (ncu, `--clock-control none`; written by pytest-kforge --kforge-profile)", "",
            "| Version | Trial | Card | GPU time (us) | % of floor | TC % | DRAM % | Occ % | Regs | Local B | Bottleneck "
            "| Top opportunity | Report |",
            "|---------|-------|------|---------------|------------|------|--------|-------|------|---------|------------"
            "|-----------------|--------|"]
    return "\n".join(head + (rows or ["| - | - | - | - | - | - | - | - | - | - | - | no profiles yet | - |"])) + "\n"
