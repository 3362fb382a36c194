"""The one table of metric short names -> Nsight Compute metric names, and unit handling.

Every consumer (the rules, the knowledge base's "When to Apply" triggers, reports, baselines)
speaks the short names below; only this module knows what ncu calls them.  A short name has a
list of *candidates*, each a tuple of ncu metrics combined by the metric's ``combine`` mode:

* ``first``: the first candidate with a value (later ones are fallbacks for other ncu releases);
* ``max``:   the largest value over the candidates that have one;
* ``sum``:   a single candidate whose metrics are added (bytes read + bytes written, say).

Why these names (checked on the project's H200 with ncu 2025.3, see /work/shared/gpu/README.md):

* ``tensor_pct``: ``sm__pipe_tensor_op_hmma_cycles_active`` reports wgmma activity too (90% for a
  cuTile matmul; 45.5% / 51.4% for the wgmma-only mla v3 decode / spec kernels in the 2026-12-02
  capture, equal to ``sm__pipe_tensor_cycles_active``), so hmma comes first; the others are
  fallbacks and the maximum wins.  ``sm__inst_executed_pipe_tensor_op_gmma`` is an issue rate
  (7.6% on v3 spec), not pipe-busy cycles, so it is the last resort.  ``sm__pipe_tensor_op_gmma_cycles_active``
  was removed: ncu 2025.3.1 does not list it on GH100 (tests/data/ncu/h200-query-metrics-bases.txt).
* ``dram_pct``: ``gpu__dram_throughput`` is the stock SpeedOfLight name for CC 9.0;
  ``dram__throughput`` is the older one.
* ``local_spill_bytes``: local-memory traffic through L1 (loads + stores).  Local memory is mostly
  register spills; local arrays count too.  The section-defined ``derived__local_spilling_*``
  metrics would need the whole MemoryWorkloadAnalysis section (many more replay passes).

``python -m pytest_kforge.profile --list-metrics`` prints the table; ``--check-metrics`` runs
``ncu --query-metrics`` and says which candidates this ncu/GPU knows (the doctor check).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping

#: warp stall reasons the derived opportunities read (:mod:`.derive`); here so the knowledge triggers can
#: name the derived quantities without importing the rules
STALL_REASONS = ("barrier", "long_scoreboard", "wait", "short_scoreboard", "mio_throttle", "math_pipe_throttle",
                 "gmma", "no_instruction", "not_selected", "dispatch_stall", "lg_throttle", "membar", "sleeping",
                 "tex_throttle", "drain", "branch_resolving", "imc_miss", "misc")
#: the quantities :mod:`.derive` computes from the counters (they join a report's metrics)
DERIVED_METRICS = ("dram_excess_pct", "tensor_idle_pct", "tail_idle_pct", "combine_share_pct",
                   "occupancy_limit_blocks", "issue_active_pct", "peer_gap_pct",
                   *(f"stall_{r}_pct" for r in STALL_REASONS))

__all__ = [
    "MetricDef",
    "METRICS",
    "CONTRACT_SHORT_NAMES",
    "ncu_metric_names",
    "resolve",
    "to_unit",
    "parse_number",
    "parse_query_metrics",
    "check_metrics",
]


@dataclasses.dataclass(frozen=True)
class MetricDef:
    """One short name: what it means, its unit, and the ncu metrics that give it."""

    short: str
    unit: str  # the unit of the short name's value: "us", "%", "KB", "MB", "B", "count"
    candidates: tuple[tuple[str, ...], ...]
    combine: str = "first"  # "first" | "max" | "sum"
    description: str = ""

    def names(self) -> tuple[str, ...]:
        return tuple(n for cand in self.candidates for n in cand)


def _m(short: str, unit: str, *cands: str | tuple[str, ...], combine: str = "first", desc: str = "") -> MetricDef:
    return MetricDef(short, unit, tuple((c,) if isinstance(c, str) else tuple(c) for c in cands), combine, desc)


#: short name -> definition; the first twelve are the contract's (brief: "Metric short names").
METRICS: dict[str, MetricDef] = {d.short: d for d in (
    _m("duration_us", "us", "gpu__time_duration.sum", desc="kernel duration on the GPU"),
    _m("dram_pct", "%", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
       "dram__throughput.avg.pct_of_peak_sustained_elapsed", desc="DRAM throughput, % of peak"),
    _m("sm_pct", "%", "sm__throughput.avg.pct_of_peak_sustained_elapsed", desc="SM (compute) throughput, % of peak"),
    _m("tensor_pct", "%", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
       "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
       "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
       combine="max", desc="tensor-pipe utilisation, % of peak (active cycles)"),
    _m("achieved_occupancy_pct", "%", "sm__warps_active.avg.pct_of_peak_sustained_active",
       desc="achieved occupancy, % of the SM's warp slots"),
    _m("theoretical_occupancy_pct", "%", "sm__maximum_warps_per_active_cycle_pct",
       desc="theoretical occupancy, % of the SM's warp slots"),
    _m("registers_per_thread", "count", "launch__registers_per_thread", desc="registers per thread"),
    _m("shared_mem_per_block_kb", "KB", ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
       combine="sum", desc="shared memory per block (static + dynamic)"),
    _m("local_spill_bytes", "B", ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
                                  "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
       combine="sum", desc="local-memory bytes loaded + stored (register spills, local arrays)"),
    _m("l2_hit_pct", "%", "lts__t_sector_hit_rate.pct", desc="L2 hit rate"),
    _m("dram_read_mb", "MB", "dram__bytes_read.sum", desc="DRAM bytes read (1 MB = 1e6 bytes)"),
    _m("dram_write_mb", "MB", "dram__bytes_write.sum", desc="DRAM bytes written (1 MB = 1e6 bytes)"),
    # extra inputs of the rules (not columns of the contract)
    _m("mem_pct", "%", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
       desc="memory-system throughput (DRAM, L2, L1), % of peak"),
    _m("grid_size", "count", "launch__grid_size", desc="CTAs launched"),
    _m("block_size", "count", "launch__block_size", desc="threads per CTA"),
    _m("waves_per_sm", "count", "launch__waves_per_multiprocessor", desc="waves of CTAs per SM"),
    _m("num_sms", "count", "device__attribute_multiprocessor_count", desc="SMs on the device"),
)}

CONTRACT_SHORT_NAMES: tuple[str, ...] = tuple(list(METRICS)[:12])

# prefixes of metrics that `ncu --query-metrics` lists (hardware counters); launch__ / device__
# attributes are collected with every kernel and are not listed there.
_COUNTER_PREFIXES = ("dram__", "gpu__", "sm__", "smsp__", "lts__", "l1tex__", "fbpa__")


def _is_counter(name: str) -> bool:
    """Counters with a roll-up suffix (``.sum``, ``.pct``...) are what --query-metrics lists."""
    return name.startswith(_COUNTER_PREFIXES) and "." in name


def ncu_metric_names(shorts: Iterable[str] | None = None, available: set[str] | None = None) -> list[str]:
    """The ncu metrics to pass to ``--metrics`` (deduplicated, in table order).

    ``available`` (base names from ``ncu --query-metrics``) drops counters this ncu does not list,
    so one stale fallback never fails a whole run; launch/device attributes are always kept, and a
    short name none of whose candidates is listed keeps its first candidate (a listing in an
    unexpected format must not silently remove a metric).
    """
    out: list[str] = []
    for short in (shorts or METRICS):
        d = METRICS[short]
        names = list(d.names())
        if available is not None:
            listed = [n for n in names if not _is_counter(n) or n.split(".")[0] in available]
            names = listed if any(_is_counter(n) for n in listed) or not any(_is_counter(n) for n in names) \
                else list(d.candidates[0])
        for name in names:
            if name not in out:
                out.append(name)
    return out


_SCALE = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_UNIT_RE = re.compile(r"^(?P<prefix>[numkKMGT]?)(?P<base>second|s|byte|B)$")


def _base_value(value: float, unit: str) -> tuple[float, str]:
    """(value in seconds or bytes, "s"/"B"), or (value, unit) when the unit is not time/size."""
    u = (unit or "").strip().split("/")[0]  # "byte/block" -> "byte"
    if u in ("nsecond", "ns"):  # the common cases, spelled out for speed and clarity
        return value * 1e-9, "s"
    m = _UNIT_RE.match(u)
    if not m or (m.group("base") in ("s",) and m.group("prefix") in ("K", "k", "M", "G", "T")):
        return value, u
    base = "s" if m.group("base") in ("second", "s") else "B"
    return value * _SCALE[m.group("prefix")], base


def to_unit(value: float, unit: str, target: str) -> float:
    """Convert ``value`` given in ncu's ``unit`` to a short name's ``target`` unit."""
    base, kind = _base_value(value, unit)
    if target == "us" and kind == "s":
        return base * 1e6
    if target == "KB" and kind == "B":
        return base / 1024.0  # shared memory: KiB, as CUDA reports it
    if target == "MB" and kind == "B":
        return base / 1e6
    if target == "B" and kind == "B":
        return base
    return value  # %, counts, unknown units: as given


def parse_number(text: object) -> float | None:
    """``"1,234.5"`` -> 1234.5; ``"n/a"``, ``""`` and non-numbers -> None."""
    if isinstance(text, (int, float)):
        return None if isinstance(text, float) and math.isnan(text) else float(text)
    s = str(text).strip().replace(",", "")
    if not s or s.lower() in ("n/a", "nan", "-", "(!)"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def resolve(raw: Mapping[str, tuple[float | None, str]]) -> tuple[dict[str, float], dict[str, str]]:
    """Short-name values from one kernel's raw ncu metrics ``{ncu name: (value or None, unit)}``.

    Returns ``(values, sources)``: ``sources[short]`` names the ncu metric(s) the value came from,
    so a report can say exactly which counter it read.  Short names with no value are left out.
    """
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for short, d in METRICS.items():
        got: list[tuple[float, str]] = []
        for cand in d.candidates:
            parts = [raw.get(n) for n in cand]
            if any(p is None or p[0] is None for p in parts):
                continue
            total = sum(to_unit(float(p[0]), p[1], d.unit) for p in parts if p is not None and p[0] is not None)
            got.append((total, "+".join(cand)))
            if d.combine in ("first", "sum"):
                break
        if not got:
            continue
        best = max(got, key=lambda g: g[0]) if d.combine == "max" else got[0]
        values[short], sources[short] = best
    return values, sources


_QUERY_LINE = re.compile(r"^\s*([a-z][a-z0-9]*__[A-Za-z0-9_]+)(?:\.[A-Za-z0-9_.]+)?\s")


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names listed by ``ncu --query-metrics`` (any ``--query-metrics-mode``)."""
    names: set[str] = set()
    for line in text.splitlines():
        m = _QUERY_LINE.match(line + " ")
        if m:
            names.add(m.group(1))
    return names


def check_metrics(available: set[str]) -> list[tuple[str, str, str]]:
    """``(short, status, detail)`` for every short name against ``ncu --query-metrics`` output.

    status is ``ok`` (a candidate's counters are all listed), ``missing`` (none is), or
    ``attribute`` (launch/device attributes: not listed by --query-metrics, always collected).
    """
    rows: list[tuple[str, str, str]] = []
    for short, d in METRICS.items():
        counters = [n for n in d.names() if _is_counter(n)]
        if not counters:
            rows.append((short, "attribute", ", ".join(d.names())))
            continue
        found = [" + ".join(c) for c in d.candidates
                 if all(n.split(".")[0] in available for n in c if _is_counter(n))]
        if found:
            rows.append((short, "ok", found[0]))
        else:
            rows.append((short, "missing", "none of: " + " | ".join("+".join(c) for c in d.candidates)))
    return rows
