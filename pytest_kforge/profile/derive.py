"""Opportunities derived from the counters themselves, for when the knowledge base runs dry.

The profile contract lists three opportunities.  At the frontier every knowledge entry that
matches is one the version already applies, so :func:`derive` reads the rest off the counters:
each rule below fires on a condition over short-name metrics (so LEARN can turn it into an entry
with that condition as its trigger), estimates its gain from the numbers, and names the counters
it read in one evidence line.  Estimates are bounds under the stated model, never more than the
distance to the roofline floor (``100 - pct_floor``).

=========================  ========================================  ================================================
name                       fires when (the entry's trigger)          est. gain (% of the version's GPU time)
=========================  ========================================  ================================================
cut-dram-rereads           dram_excess_pct >= 5                      re-read share of DRAM bytes x DRAM busy %
raise-tensor-pipe-busy     tensor_pct >= 25 and tensor_idle_pct > 10  1 - tensor_pct / target (peer's, else 90%)
relax-occupancy-limit      1 CTA/SM, occupancy < 25%, idle > 10%     f / (1 + f), f = tensor idle share (2 CTAs)
fill-the-last-wave         tail_idle_pct >= 1                        idle SM share of the last wave x stage share
fold-the-combine           0.2 <= combine_share_pct < 50             the other launches' share of GPU time
cut-<reason>-stalls        stall_<reason>_pct >= 20                  stall share x idle issue slots
close-gap-to-<peer>        peer_gap_pct >= 1                         (ours - peer's) / ours, own kernels only
=========================  ========================================  ================================================

The derived quantities (:data:`DERIVED_METRICS`) join the report's metrics, so knowledge triggers
may name them too.  Stall shares need ``smsp__average_warps_issue_stalled_*`` counters (``--set
full``, :mod:`.side`); the gap to a peer needs the peer's kernels from the same capture.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .metrics import DERIVED_METRICS, STALL_REASONS
from .parse import KernelRecord

__all__ = ["DERIVED_MARK", "DERIVED_METRICS", "STALL_REASONS", "TENSOR_TARGET_PCT", "Derived", "RuleSpec", "derive",
           "derived_metrics", "is_derived", "spec_for"]

#: the ``entry`` field of a derived opportunity: what tells it from a knowledge-base match
DERIVED_MARK = "not in the knowledge base (derived from counters)"
#: the tensor-pipe busy share a well-pipelined wgmma kernel reaches on this H200 (a cuTile matmul: 90%,
#: see :mod:`.metrics`); the target when no peer was profiled beside the version
TENSOR_TARGET_PCT = 90.0
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_LIMITS = ("registers", "shared_mem", "warps", "blocks", "barriers")
_COPY_KERNELS = ("elementwise_kernel", "direct_copy", "copy_kernel")  # a peer's copy into the harness's buffers


@dataclasses.dataclass(frozen=True)
class RuleSpec:
    """What a rule is, independent of one profile: LEARN writes an entry from it."""

    name: str
    title: str
    condition: str      # a knowledge trigger over short names
    mechanism: str
    affected: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Derived:
    """One derived opportunity: ``trigger`` shows the values, ``evidence`` the counters and the arithmetic."""

    name: str
    est_gain_pct: float
    trigger: str
    evidence: str
    condition: str

    def opportunity(self) -> Any:
        from pytest_kforge.contracts import Opportunity

        return Opportunity(self.name, self.est_gain_pct, self.trigger, DERIVED_MARK)


_SPECS: dict[str, RuleSpec] = {s.name: s for s in (
    RuleSpec("cut-dram-rereads", "Cut DRAM re-reads down to the spec's minimum bytes", "dram_excess_pct >= 5",
             "DRAM moves more bytes than the operands and outputs hold; the excess is data read twice (evicted "
             "from L2 between its readers) or written twice. Keep reused tiles resident or order CTAs so "
             "readers of one tile run together.", ("dram_read_mb", "dram_write_mb", "l2_hit_pct", "dram_excess_pct")),
    RuleSpec("raise-tensor-pipe-busy", "Keep the tensor pipe busy between wgmma groups",
             "tensor_pct >= 25 and tensor_idle_pct > 10",
             "The tensor pipe idles between wgmma groups while softmax, barriers or TMA waits run; deeper "
             "software pipelining (issue the next group before the current one's epilogue) hides them.",
             ("tensor_pct", "tensor_idle_pct", "duration_us")),
    RuleSpec("relax-occupancy-limit", "Fit a second CTA per SM (registers/shared memory)",
             "occupancy_limit_blocks <= 1 and achieved_occupancy_pct < 25 and tensor_idle_pct > 10",
             "One CTA per SM leaves nothing to issue while it waits; a second resident CTA's MMAs fill the "
             "first one's idle tensor cycles. It needs the limiting resource (registers or shared memory) halved.",
             ("achieved_occupancy_pct", "registers_per_thread", "shared_mem_per_block_kb", "tensor_idle_pct")),
    RuleSpec("fill-the-last-wave", "Balance the last wave of CTAs over the SMs", "tail_idle_pct >= 1",
             "The grid is not a multiple of the resident CTA slots, so SMs idle in the last wave; re-split the "
             "work (more, smaller units or a persistent schedule that balances them) so every SM ends together.",
             ("grid_size", "waves_per_sm", "tail_idle_pct")),
    RuleSpec("fold-the-combine", "Fold or overlap the combine launch",
             "combine_share_pct >= 0.2 and combine_share_pct < 50",
             "Launches besides the main kernel (a split-KV combine) add their time in series; merging them into "
             "the main kernel's epilogue or overlapping them (PDL) removes it.", ("num_launches", "combine_share_pct")),
)}


def spec_for(name: str) -> RuleSpec | None:
    """The rule behind a derived opportunity name (None for a name no rule derives)."""
    if name in _SPECS:
        return _SPECS[name]
    if name.startswith("cut-") and name.endswith("-stalls"):
        reason = name[len("cut-"):-len("-stalls")].replace("-", "_")
        if reason in STALL_REASONS:
            return RuleSpec(name, f"Cut {reason} stalls", f"stall_{reason}_pct >= 20",
                            f"Warps wait on `{reason}` for a large share of their stalled cycles; remove the "
                            f"dependency or give the scheduler other warps' work meanwhile.",
                            (f"stall_{reason}_pct", "issue_active_pct"))
    if name.startswith("close-gap-to-") and len(name) > len("close-gap-to-"):
        peer = name[len("close-gap-to-"):]
        return RuleSpec(name, f"Close the gap to {peer}", "peer_gap_pct >= 1",
                        f"{peer}'s kernels, profiled in the same capture, take less GPU time; the counters that "
                        f"differ most say where (instructions, stalls, bank conflicts, bytes).", ("peer_gap_pct",))
    return None


def is_derived(entry_ref: str) -> bool:
    """Whether an opportunity's ``entry`` field marks it as derived (not a knowledge-base file)."""
    return str(entry_ref).strip().startswith("not in the knowledge base")


# -- the derived quantities ---------------------------------------------------------------------------------------
def _raw(rec: KernelRecord, name: str) -> float | None:
    v = rec.raw.get(name)
    return None if v is None or v[0] is None else float(v[0])


def _longest(records: Sequence[KernelRecord]) -> KernelRecord:
    return max(records, key=lambda r: r.metrics.get("duration_us", 0.0))


def _blocks_per_sm(rec: KernelRecord) -> float | None:
    vals = [v for k in _LIMITS if (v := _raw(rec, f"launch__occupancy_limit_{k}")) is not None]
    return min(vals) if vals else None


def _own_us(records: Sequence[KernelRecord]) -> float:
    return sum(r.metrics.get("duration_us", 0.0) for r in records if not any(k in r.name for k in _COPY_KERNELS))


def derived_metrics(records: Sequence[KernelRecord], agg: Mapping[str, float], *, min_bytes: float | None = None,
                    peers: Mapping[str, Sequence[KernelRecord]] | None = None) -> dict[str, float]:
    """The :data:`DERIVED_METRICS` these records support (see the module table), rounded to 4 digits."""
    if not records:
        return {}
    out: dict[str, float] = {}
    dom = _longest(records)
    total = agg.get("duration_us") or sum(r.metrics.get("duration_us", 0.0) for r in records)
    moved = (agg.get("dram_read_mb", 0.0) + agg.get("dram_write_mb", 0.0)) * 1e6
    if min_bytes and moved > 0:
        out["dram_excess_pct"] = (moved / min_bytes - 1.0) * 100.0
    if "tensor_pct" in agg:
        out["tensor_idle_pct"] = 100.0 - float(agg["tensor_pct"])
    bps = _blocks_per_sm(dom)
    if bps is not None:
        out["occupancy_limit_blocks"] = bps
    sms, grid = dom.metrics.get("num_sms"), dom.metrics.get("grid_size")
    waves = grid / (sms * bps) if grid and sms and bps else dom.metrics.get("waves_per_sm")
    if waves:
        full = math.ceil(waves - 1e-9)
        out["tail_idle_pct"] = (full - waves) / full * 100.0
    if len(records) > 1 and total:
        out["combine_share_pct"] = (total - dom.metrics.get("duration_us", 0.0)) / total * 100.0
    issue = _raw(dom, "smsp__issue_active.avg.pct_of_peak_sustained_active")
    if issue is not None:
        out["issue_active_pct"] = issue
    stalls = {r: v for r in STALL_REASONS if (v := _raw(dom, _STALL.format(r))) is not None}
    if sum(stalls.values()) > 0:
        out.update({f"stall_{r}_pct": v / sum(stalls.values()) * 100.0 for r, v in stalls.items()})
    ours = _own_us(records)
    gaps = [(ours - _own_us(p)) / ours * 100.0 for p in (peers or {}).values() if p and ours > 0]
    if gaps:
        out["peer_gap_pct"] = max(gaps)
    return {k: round(v, 4) for k, v in out.items()}


# -- the rules ----------------------------------------------------------------------------------------------------
def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 1e4 else f"{v:.4g}"


def _vals(m: Mapping[str, float], *keys: str) -> str:
    return ", ".join(f"{k}={_num(float(m[k]))}" for k in keys if k in m)


def _cap(gain: float, m: Mapping[str, float]) -> float:
    """``gain`` no larger than the distance to the roofline floor, rounded to 0.1."""
    if "pct_floor" in m and 0 < float(m["pct_floor"]) <= 100:
        gain = min(gain, 100.0 - float(m["pct_floor"]))
    return round(max(gain, 0.0), 1)


def _c(rec: KernelRecord | None, name: str, fmt: str = "{:.4g}") -> str:
    """``name=value`` of one raw counter of ``rec`` ("" when absent)."""
    v = _raw(rec, name) if rec is not None else None
    return "" if v is None else f"{name}={fmt.format(v)}"


def _join(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


def derive(m: Mapping[str, float], records: Sequence[KernelRecord] = (), *,
           peers: Mapping[str, Sequence[KernelRecord]] | None = None, min_bytes: float | None = None,
           bandwidth: float | None = None) -> list[Derived]:
    """Every rule of the module table that fires on metrics ``m`` (which carry :func:`derived_metrics`),
    best estimate first; ``records`` (and ``peers``' records) feed the evidence lines.  ``bandwidth`` (bytes/s)
    prices extra DRAM traffic: the run's roofline (:func:`pytest_kforge.calibrate.roofline_for`), else the
    :class:`~pytest_kforge.spec.Roofline` default."""
    if bandwidth is None:
        from pytest_kforge.spec import Roofline

        bandwidth = Roofline().bandwidth_bytes_per_s
    dom = _longest(records) if records else None
    got: list[Derived] = []

    def add(name: str, gain: float, trigger: str, evidence: str) -> None:
        spec = spec_for(name)
        assert spec is not None, name
        est = _cap(gain, m)
        if est < round(gain, 1):
            evidence += f" ({gain:.1f}%, capped at the distance to the roofline floor, 100 - pct_floor = {est:g}%)"
        got.append(Derived(name, est, trigger, evidence, spec.condition))

    holds = _holds(m)
    if holds("cut-dram-rereads"):
        moved = (m.get("dram_read_mb", 0.0) + m.get("dram_write_mb", 0.0)) * 1e6
        excess = moved - moved / (1 + m["dram_excess_pct"] / 100)
        add("cut-dram-rereads", excess / moved * m.get("dram_pct", 0.0), _vals(m, "dram_excess_pct", "dram_pct"),
            f"dram__bytes_read.sum + dram__bytes_write.sum = {moved / 1e6:.1f} MB against the spec's minimum "
            f"{(min_bytes or moved - excess) / 1e6:.1f} MB (+{m['dram_excess_pct']:.1f}%, {excess / 1e6:.1f} MB "
            f"extra, {excess / bandwidth * 1e6:.1f} us at {bandwidth / 1e12:g} TB/s); lts__t_sector_hit_rate "
            f"{m.get('l2_hit_pct', float('nan')):.1f}%; est. = extra/moved x DRAM busy {m.get('dram_pct', 0):.1f}%")
    peer_tensor = _peer_tensor(peers)
    if holds("raise-tensor-pipe-busy"):
        t = float(m["tensor_pct"])
        target, why = ((peer_tensor[1], f"{peer_tensor[0]}'s {peer_tensor[1]:.1f}% in the same capture")
                       if peer_tensor and peer_tensor[1] > t else (TENSOR_TARGET_PCT, "the 90% reference"))
        add("raise-tensor-pipe-busy", (1 - t / target) * 100, _vals(m, "tensor_pct", "tensor_idle_pct"),
            f"sm__pipe_tensor_op_hmma_cycles_active {t:.1f}% of active cycles (idle {100 - t:.1f}%{_spread(dom)}); "
            f"est. = 1 - {t:.1f}/{target:.1f} (target: {why}; time ~ MMA cycles / busy share)")
    if holds("relax-occupancy-limit") and dom is not None and _second_cta_fits(dom):  # the SM's budgets, halved
        f = m["tensor_idle_pct"] / 100
        threads = dom.metrics.get("block_size", 0.0)
        regs_sm = _raw(dom, "device__attribute_max_registers_per_multiprocessor") or 65536.0
        smem_sm = _raw(dom, "device__attribute_max_shared_memory_per_multiprocessor") or 233472.0
        limiters = [k for k in _LIMITS if _raw(dom, f"launch__occupancy_limit_{k}") == m["occupancy_limit_blocks"]]
        need = (f"2 CTAs/SM need <= {regs_sm / (2 * threads):.0f} registers/thread (now "
                f"{dom.metrics.get('registers_per_thread', 0):.0f}) and <= {smem_sm / 2 / 1024:.0f} KB shared memory "
                f"per CTA incl. the driver's 1 KB (now {dom.metrics.get('shared_mem_per_block_kb', 0):.0f} KB)"
                if threads else "")
        add("relax-occupancy-limit", f / (1 + f) * 100,
            _vals(m, "occupancy_limit_blocks", "achieved_occupancy_pct", "tensor_idle_pct"),
            _join(*(f"launch__occupancy_limit_{k}=1" for k in limiters), f"sm__warps_active "
                  f"{m.get('achieved_occupancy_pct', 0):.1f}% of {_raw(dom, 'sm__maximum_warps_per_active_cycle_pct') or 0:.2f}% "
                  f"theoretical", need) + f"; est. = f/(1+f) with f = tensor idle {f:.2f} (a second CTA's MMAs "
            f"fill the first one's idle cycles, each idle independently; the same idle cycles as raise-tensor-pipe-busy)")
    if holds("fill-the-last-wave") and dom is not None:
        bps = _blocks_per_sm(dom) or 1.0
        grid, sms = dom.metrics.get("grid_size", 0.0), dom.metrics.get("num_sms", 0.0)
        share = dom.metrics.get("duration_us", 0.0) / (m.get("duration_us") or 1.0)
        waves = grid / (sms * bps) if grid and sms else dom.metrics.get("waves_per_sm", 0.0)
        last = (waves - math.floor(waves)) * sms * bps if sms else 0
        add("fill-the-last-wave", m["tail_idle_pct"] * share, _vals(m, "tail_idle_pct", "grid_size", "waves_per_sm"),
            _join(_c(dom, "launch__grid_size", "{:.0f}"), _c(dom, "device__attribute_multiprocessor_count", "{:.0f}"),
                  f"{bps:g} CTA/SM", _c(dom, "launch__waves_per_multiprocessor"))
            + f": {waves:.2f} waves, the last one runs {last:.0f} CTAs on {sms * bps:.0f} slots, so "
            f"{m['tail_idle_pct']:.1f}% of SM time idles (equal CTAs) x {share * 100:.1f}% (the stage's share of GPU "
            f"time){_spread(dom, '; tensor pipe busy per SM')}")
    if holds("fold-the-combine") and records:
        rest = [r for r in records if r is not dom]
        add("fold-the-combine", m["combine_share_pct"], _vals(m, "combine_share_pct", "num_launches"),
            f"gpu__time_duration.sum {' + '.join(format(r.metrics.get('duration_us', 0.0), '.2f') for r in rest)} us of "
            f"{m.get('duration_us', 0):.1f} us in all ({len(rest)} launch(es) besides the main kernel); est. = their share")
    stalls = sorted(((r, m[f"stall_{r}_pct"]) for r in STALL_REASONS if f"stall_{r}_pct" in m), key=lambda x: -x[1])
    for reason, share in stalls:
        name = f"cut-{reason.replace('_', '-')}-stalls"
        if not holds(name):
            continue
        idle = 100.0 - m.get("issue_active_pct", 0.0)
        add(name, share * idle / 100, _vals(m, f"stall_{reason}_pct", "issue_active_pct"),
            f"{_c(dom, _STALL.format(reason), '{:.3g}')} warps per issue, {share:.1f}% of the stalled warps' "
            f"reasons (selected excluded); smsp__issue_active {m.get('issue_active_pct', 0):.1f}%; est. = share x "
            f"idle issue slots {idle:.1f}%")
    for peer, recs in (peers or {}).items():
        name = f"close-gap-to-{peer}"
        ours, theirs = _own_us(records), _own_us(recs)
        if not (records and recs and ours > 0 and (ours - theirs) / ours * 100 >= 1):
            continue
        add(name, (ours - theirs) / ours * 100, f"peer_gap_pct={(ours - theirs) / ours * 100:.4g}",
            f"gpu__time_duration.sum {ours:.1f} us (ours) vs {theirs:.1f} us ({peer}, own kernels); counters that "
            f"differ most (main kernels): {_peer_diff(_longest(records), _longest(recs))}")
    return sorted(got, key=lambda d: (-d.est_gain_pct, d.name))


def _spread(rec: KernelRecord | None, lead: str = ", per SM") -> str:
    """``, per SM 0.0% min / 65.0% max`` of the tensor-pipe counter (an SM at 0% ran no CTA)."""
    base = "sm__pipe_tensor_op_hmma_cycles_active.{}.pct_of_peak_sustained_active"
    lo, hi = (_raw(rec, base.format(k)) if rec is not None else None for k in ("min", "max"))
    return "" if lo is None or hi is None else f"{lead} {lo:.1f}% min / {hi:.1f}% max (.min/.max)"


def _holds(m: Mapping[str, float]) -> Any:
    from pytest_kforge.knowledge.triggers import parse_trigger

    def holds(name: str) -> bool:
        spec = spec_for(name)
        return spec is not None and parse_trigger(spec.condition).holds(m)
    return holds


#: a second CTA per SM is a relaxation (not a redesign) when neither budget must shrink by more than this share
RELAX_MAX_CUT = 0.25


def _second_cta_fits(dom: Any) -> bool:
    """Whether two CTAs per SM are within reach: registers per thread and shared memory per CTA each within
    ``RELAX_MAX_CUT`` of half the SM's.  A CTA that fills the SM by design (v59_cute: a 216 KB KV ring, 168
    registers x 384 threads) would have to halve its ring or its accumulators: another kernel, not a relaxation
    (stop 44: the loop offered it at an estimated 27%).  Unknown sizes keep the opportunity."""
    threads = dom.metrics.get("block_size", 0.0)
    regs = dom.metrics.get("registers_per_thread", 0.0)
    smem_kb = dom.metrics.get("shared_mem_per_block_kb", 0.0)
    regs_sm = _raw(dom, "device__attribute_max_registers_per_multiprocessor") or 65536.0
    smem_sm = _raw(dom, "device__attribute_max_shared_memory_per_multiprocessor") or 233472.0
    fits = []
    if threads and regs:
        fits.append(regs * (1 - RELAX_MAX_CUT) <= regs_sm / (2 * threads))
    if smem_kb:
        fits.append(smem_kb * (1 - RELAX_MAX_CUT) <= smem_sm / 2 / 1024 - 1)
    return all(fits)


def _peer_tensor(peers: Mapping[str, Sequence[KernelRecord]] | None) -> tuple[str, float] | None:
    best = [(p, float(_longest(r).metrics["tensor_pct"])) for p, r in (peers or {}).items()
            if r and "tensor_pct" in _longest(r).metrics]
    return max(best, key=lambda x: x[1]) if best else None


#: counters where more is better (busy shares, occupancy, clock); for the rest (stalls, instructions, bytes,
#: bank conflicts, registers) less is better
_MORE_IS_BETTER = ("sm__pipe_tensor", "smsp__issue_active", "sm__warps_active", "sm__cycles_elapsed")


def _peer_diff(ours: KernelRecord, peer: KernelRecord, top: int = 4) -> str:
    """The counters of the side-by-side set that differ most between two kernels: those where ours is worse
    first, each group by largest relative difference."""
    from .side import CURATED, FAMILIES

    names = [n for n, _ in CURATED if n not in ("gpu__time_duration.sum", "launch__grid_size", "launch__block_size")]
    names += [n for n in ours.raw if any(n.startswith(p) and n.endswith(s) for p, s, _ in FAMILIES[:1])]
    diffs = []
    for n in dict.fromkeys(names):
        a, b = _raw(ours, n), _raw(peer, n)
        if a is None or b is None or max(abs(a), abs(b)) == 0 or max(abs(a), abs(b)) < 0.05:
            continue
        worse = (a < b) if n.startswith(_MORE_IS_BETTER) else (a > b)
        diffs.append((worse, abs(a - b) / max(abs(a), abs(b)), n, a, b))
    diffs.sort(key=lambda d: (not d[0], -d[1]))
    return "; ".join(f"{n} {a:.4g} vs {b:.4g} ({(a - b) / b * 100:+.0f}%{', ours worse' if w else ''})"
                     for w, _, n, a, b in diffs[:top]) or "none"
