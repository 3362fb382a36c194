"""Bottleneck rules: documented, tested, no guesswork.

Inputs are short-name metrics (:mod:`.metrics`) of one stage or of the time-weighted whole, plus
the roofline position from the spec's FLOP and minimal-byte counts.  The rules, in order (the
first that fires decides the class):

====  ===============================================================  =============
rule  condition                                                        class
====  ===============================================================  =============
M1    dram_pct >= 60 and tensor_pct < 50                               Memory
C1    tensor_pct >= 50                                                 Compute
C2    the spec is compute-bound by the roofline and sm_pct >= 60       Compute
M2    mem_pct >= 70 (L1/L2 traffic saturates; DRAM below 60)           Memory
L*    otherwise                                                        Latency
====  ===============================================================  =============

A Latency-bound verdict names its causes, checked in this order (all that hold are listed):

====  ===============================================================  ==========================
L1    local_spill_bytes >= 1 MB                                        register spills
L2    grid_size < num_sms (132 on the H200)                            too few CTAs for the SMs
L3    achieved_occupancy_pct < 25                                      low occupancy
L4    num_launches >= 5 and mean stage duration < 10 us               launch overhead
L5    none of the above                                                stalls (dependent memory
                                                                       latency or synchronisation)
====  ===============================================================  ==========================

Thresholds live in :data:`THRESHOLDS` so a test (or a knowledge-base entry) can name them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

__all__ = ["THRESHOLDS", "Verdict", "classify", "aggregate", "key_issue", "root_cause", "H200_SMS"]

H200_SMS = 132

THRESHOLDS: dict[str, float] = {
    "dram_high": 60.0,      # M1
    "tensor_high": 50.0,    # C1, and the "tensor low" half of M1
    "sm_high": 60.0,        # C2
    "mem_high": 70.0,       # M2
    "occ_low": 25.0,        # L3
    "launches_many": 5,     # L4
    "short_stage_us": 10.0,  # L4
    "spill_bytes": 1e6,     # L1
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A classification: ``kind`` is "Memory", "Compute" or "Latency"; ``rule`` the rule id."""

    kind: str
    rule: str
    causes: tuple[str, ...] = ()  # Latency causes (rule ids L1..L5) in order
    evidence: str = ""            # "dram_pct=83.1, tensor_pct=12.0"


def _get(m: Mapping[str, float], key: str, default: float = 0.0) -> float:
    v = m.get(key)
    return default if v is None else float(v)


def _fmt(m: Mapping[str, float], *keys: str) -> str:
    return ", ".join(f"{k}={_get(m, k):.4g}" for k in keys if k in m)


def latency_causes(m: Mapping[str, float]) -> tuple[str, ...]:
    causes = []
    if _get(m, "local_spill_bytes") >= THRESHOLDS["spill_bytes"]:
        causes.append("L1")
    if "grid_size" in m and _get(m, "grid_size") < _get(m, "num_sms", H200_SMS):
        causes.append("L2")
    if "achieved_occupancy_pct" in m and _get(m, "achieved_occupancy_pct") < THRESHOLDS["occ_low"]:
        causes.append("L3")
    n = _get(m, "num_launches", 1)
    if n >= THRESHOLDS["launches_many"] and _get(m, "duration_us") / max(n, 1) < THRESHOLDS["short_stage_us"]:
        causes.append("L4")
    return tuple(causes) or ("L5",)


def classify(m: Mapping[str, float], *, roofline_bound: str | None = None) -> Verdict:
    """Apply the rules of the module docstring to metrics ``m``.

    ``roofline_bound`` is ``"compute"`` or ``"memory"`` from ``Roofline.bound(flops, min_bytes)``
    (None when unknown, e.g. for a single stage).
    """
    dram, tensor, sm, mem = (_get(m, k) for k in ("dram_pct", "tensor_pct", "sm_pct", "mem_pct"))
    if dram >= THRESHOLDS["dram_high"] and tensor < THRESHOLDS["tensor_high"]:
        return Verdict("Memory", "M1", evidence=_fmt(m, "dram_pct", "tensor_pct"))
    if tensor >= THRESHOLDS["tensor_high"]:
        return Verdict("Compute", "C1", evidence=_fmt(m, "tensor_pct", "sm_pct"))
    if roofline_bound == "compute" and sm >= THRESHOLDS["sm_high"]:
        return Verdict("Compute", "C2", evidence=_fmt(m, "sm_pct", "tensor_pct", "arith_intensity"))
    if mem >= THRESHOLDS["mem_high"]:
        return Verdict("Memory", "M2", evidence=_fmt(m, "mem_pct", "dram_pct", "l2_hit_pct"))
    causes = latency_causes(m)
    return Verdict("Latency", causes[0], causes,
                   evidence=_fmt(m, "dram_pct", "tensor_pct", "sm_pct", "achieved_occupancy_pct"))


def key_issue(m: Mapping[str, float], v: Verdict) -> str:
    """A few words for a stage row's Key Issue column."""
    if v.rule == "M1":
        return f"DRAM {_get(m, 'dram_pct'):.0f}% of peak"
    if v.rule == "C1":
        return f"tensor pipe {_get(m, 'tensor_pct'):.0f}% busy"
    if v.rule == "C2":
        return f"SM {_get(m, 'sm_pct'):.0f}% busy, tensor {_get(m, 'tensor_pct'):.0f}%"
    if v.rule == "M2":
        return f"L1/L2 {_get(m, 'mem_pct'):.0f}%, DRAM {_get(m, 'dram_pct'):.0f}%"
    return "; ".join(_cause_short(c, m) for c in v.causes)


def _cause_short(rule: str, m: Mapping[str, float]) -> str:
    if rule == "L1":
        return f"spills {_get(m, 'local_spill_bytes') / 1e6:.3g} MB"
    if rule == "L2":
        return f"{_get(m, 'grid_size'):.0f} CTAs < {_get(m, 'num_sms', H200_SMS):.0f} SMs"
    if rule == "L3":
        return f"occupancy {_get(m, 'achieved_occupancy_pct'):.0f}%"
    if rule == "L4":
        return f"{_get(m, 'num_launches'):.0f} short launches"
    return "stalls (DRAM, tensor both low)"


def _cause_sentence(rule: str, m: Mapping[str, float]) -> str:
    if rule == "L1":
        return (f"registers spill to local memory ({_get(m, 'local_spill_bytes') / 1e6:.3g} MB of local traffic at "
                f"{_get(m, 'registers_per_thread'):.0f} registers/thread)")
    if rule == "L2":
        return (f"only {_get(m, 'grid_size'):.0f} CTAs are launched for {_get(m, 'num_sms', H200_SMS):.0f} SMs, "
                f"so part of the GPU idles")
    if rule == "L3":
        return (f"achieved occupancy is {_get(m, 'achieved_occupancy_pct'):.0f}% (theoretical "
                f"{_get(m, 'theoretical_occupancy_pct'):.0f}%, {_get(m, 'registers_per_thread'):.0f} registers/thread, "
                f"{_get(m, 'shared_mem_per_block_kb'):.0f} KB shared memory/block), too few warps to hide latency")
    if rule == "L4":
        return (f"{_get(m, 'num_launches'):.0f} kernel launches average "
                f"{_get(m, 'duration_us') / max(_get(m, 'num_launches', 1), 1):.1f} us each, so launch gaps and "
                f"tails dominate")
    return "warps stall on dependent memory accesses or synchronisation while no unit is busy"


def root_cause(m: Mapping[str, float], v: Verdict, *, dominant: str = "", dominant_share: float = 0.0) -> str:
    """Two sentences: what the counters show, and what it means for the next version.

    ``m`` are the version's time-weighted metrics; ``dominant`` names its longest stage.
    """
    n = int(_get(m, "num_launches", 1))
    where = (f"Over its {n} launches (largest: {dominant}, {dominant_share:.0f}% of GPU time) the version"
             if dominant and n > 1 else "The kernel")
    pf = f", {_get(m, 'pct_floor'):.0f}% of the roofline floor" if "pct_floor" in m else ""
    if v.kind == "Memory" and v.rule == "M1":
        return (f"{where} streams DRAM at {_get(m, 'dram_pct'):.0f}% of peak while the tensor pipe is "
                f"{_get(m, 'tensor_pct'):.0f}% busy ({_get(m, 'dram_read_mb'):.0f} MB read{pf}). "
                f"Time tracks bytes moved, so gains come from moving fewer bytes, not from faster math.")
    if v.kind == "Memory":
        return (f"{where} saturates the L1/L2 path ({_get(m, 'mem_pct'):.0f}% of peak, L2 hit "
                f"{_get(m, 'l2_hit_pct'):.0f}%) while DRAM runs at {_get(m, 'dram_pct'):.0f}%{pf}. "
                f"Re-reads through the cache hierarchy dominate; keep reused tiles in shared memory or registers.")
    if v.kind == "Compute":
        return (f"{where} keeps the tensor pipe {_get(m, 'tensor_pct'):.0f}% and the SMs {_get(m, 'sm_pct'):.0f}% "
                f"busy{pf}. Further gains need fewer or cheaper instructions (wgmma shapes, fewer softmax "
                f"rescales), not more bandwidth.")
    first = _cause_sentence(v.causes[0] if v.causes else "L5", m)
    rest = "; also " + ", ".join(_cause_short(c, m) for c in v.causes[1:]) if len(v.causes) > 1 else ""
    return (f"{where} keeps neither DRAM ({_get(m, 'dram_pct'):.0f}%) nor the tensor pipe "
            f"({_get(m, 'tensor_pct'):.0f}%) busy{pf}. The main cause: {first}{rest}.")


_WEIGHTED = ("dram_pct", "sm_pct", "tensor_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
             "l2_hit_pct", "mem_pct")
_SUMMED = ("duration_us", "local_spill_bytes", "dram_read_mb", "dram_write_mb")
# Per-launch resources come from the longest stage: on the real H200 capture of mla v3 decode the
# 14 us combine kernel has 253 registers/thread while the 91 us main kernel has 168, and a maximum
# made knowledge triggers on registers fire for the wrong kernel.
_DOMINANT = ("registers_per_thread", "shared_mem_per_block_kb", "grid_size", "block_size", "waves_per_sm", "num_sms")


def aggregate(stages: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The whole version's metrics: percentages weighted by stage duration, bytes and time summed,
    per-launch resources (registers, shared memory, grid) of the longest stage, ``num_launches``."""
    out: dict[str, float] = {"num_launches": float(len(stages))}
    total = sum(_get(s, "duration_us") for s in stages)
    for k in _SUMMED:
        vals = [s[k] for s in stages if k in s]
        if vals:
            out[k] = float(sum(vals))
    for k in _WEIGHTED:
        pairs = [(_get(s, "duration_us"), s[k]) for s in stages if k in s]
        w = sum(p[0] for p in pairs)
        if pairs:
            out[k] = sum(d * v for d, v in pairs) / w if w > 0 else sum(v for _, v in pairs) / len(pairs)
    if stages and total >= 0:
        longest = max(stages, key=lambda s: _get(s, "duration_us"))
        for k in _DOMINANT:
            if k in longest:
                out[k] = float(longest[k])
    return out
