"""What a KV work split would cost on a trial's lengths: today's plan against two length-balanced designs, on a
fitted cost model (no GPU, no DSL).  The design check for issue 35's ragged serving gap, before any kernel is written.

The model (fitted in run 31 on the H200 from two measured rows of v59_cute, one wave each): a call costs ``overhead``
plus the makespan of its CTAs on 132 SMs, one CTA per SM (216 KB of shared memory each), where a CTA costs ``fixed``
plus ``per_page`` per KV page it walks; decode (32 pages per CTA, 73.2 us) and serve_ragged (the busiest CTA 55
pages, 109.1 us) give 1.56 us per page and 23.3 us for ``overhead + fixed``.  How those 23.3 us split between the
call and each CTA is not measured, so ``--fixed`` sweeps it; multi-wave schedules depend on it, one-wave ones do not.
The makespan of a grid is a greedy list schedule in launch order (the block scheduler hands the next CTA to the first
free SM).  The model ignores the merge (partials, combine) a schedule needs beyond today's, so a schedule's
figure is a lower bound on what it would cost.

Schedules:

- ``today``: the version's own plan (``host.choose_splits`` / ``host.split_plan`` on the block table's width): every
  (sequence, row block) gets the same split count, each split ``ceil(pages / splits)`` of its own pages;
- ``uniform``: one chunk ``C`` of pages for the whole batch, each sequence cut into pairs of ``C``-page CTAs
  (``2 ceil(pages / 2C)`` splits, at most ``--max-splits``), ``C`` chosen best for the model (an oracle: what a
  device-side rule could at most reach); graph-safe with a fixed grid, the pair merge kept;
- ``bins``: FlashMLA's shape of plan, one persistent CTA per SM taking an equal share of the batch's pages in
  sequence order, cutting sequences where a share ends; a CTA pays ``fixed`` once per piece it walks.

    python kernels/mla/tools/split_model.py [--version v66_cute] [--trials serve_ragged,...] [--fixed 4,8,12]
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SMS = 132  # host.H200_SMS: the H200 the costs were fitted on
#: fitted in run 31 (H200, v59_cute's decode 73.2 us and serve_ragged 109.1 us, both one wave)
PER_PAGE_US = 1.56
ONE_WAVE_US = 23.3


@dataclass(frozen=True)
class Shape:
    """A trial's work: pages per sequence and 64-row blocks per sequence (``m_blocks``)."""

    name: str
    pages: tuple[int, ...]
    m_blocks: int


def shape_of(name: str, params: Mapping[str, int]) -> Shape:
    """The trial's pages per sequence (its fixed ragged lengths, or ``t`` for all) and row blocks."""
    from kforge_kernels.mla.cute.host import BLOCK_M, PAGE
    from kforge_kernels.mla.spec import seq_lengths

    lens = seq_lengths(params)
    return Shape(name, tuple(math.ceil(t / PAGE) for t in lens), math.ceil(int(params["s"]) * int(params["h"]) / BLOCK_M))


def makespan(works: Sequence[float], fixed: float, per_page: float = PER_PAGE_US, sms: int = SMS) -> float:
    """Greedy list schedule of CTAs in launch order: each costs ``fixed + per_page * pages`` (pages from ``works``;
    a CTA with no pages costs nothing)."""
    free = [0.0] * sms
    end = 0.0
    for w in works:
        if w <= 0:
            continue
        t = heapq.heappop(free) + fixed + per_page * w
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def today_works(shape: Shape, config: Mapping[str, object], kind: str) -> list[int]:
    """The pages of each CTA of the version's plan, in launch order (split outermost, then sequence, then row
    block), as ``host.choose_splits`` and ``host.split_plan`` decide from the block table's width."""
    from kforge_kernels.mla.cute import host

    width = max(shape.pages)
    splits, _, _ = host.split_plan(kind, host.choose_splits(len(shape.pages) * shape.m_blocks, width, config))
    works = []
    for k in range(splits):
        for p in shape.pages:
            chunk = math.ceil(p / splits)
            works += [max(0, min(chunk, p - k * chunk))] * shape.m_blocks
    return works


def uniform_works(shape: Shape, chunk: int, max_splits: int) -> list[int]:
    """The ``uniform`` schedule's CTAs for one ``chunk``: each sequence in ``n = min(max_splits / 2, ceil(pages /
    2 chunk))`` pairs of ``ceil(pages / 2n)``-page CTAs, split outermost as today's grid."""
    works = []
    for k in range(max_splits):
        for p in shape.pages:
            n = min(max_splits // 2, math.ceil(p / (2 * chunk)))
            c = math.ceil(p / (2 * n))
            works += [max(0, min(c, p - k * c)) if k < 2 * n else 0] * shape.m_blocks
    return works


def best_uniform(shape: Shape, fixed: float, max_splits: int) -> tuple[float, int]:
    """(makespan, chunk) of the best ``uniform`` chunk for the model."""
    return min((makespan(uniform_works(shape, c, max_splits), fixed), c) for c in range(1, max(shape.pages) + 1))


def bins_makespan(shape: Shape, fixed: float, sms: int = SMS) -> float:
    """The ``bins`` schedule: ``sms`` equal shares of the (sequence, row block) tiles' pages laid end to end; a share
    costs ``fixed`` per piece (tile it touches) plus its pages."""
    spans, at = [], 0  # each tile's [start, end) in the pages laid end to end
    for p in shape.pages:
        for _ in range(shape.m_blocks):
            spans.append((at, at + p))
            at += p
    share = math.ceil(at / sms)
    worst = 0.0
    for j in range(sms):
        lo, hi = j * share, min((j + 1) * share, at)
        if lo >= hi:
            break
        pieces = sum(1 for s, e in spans if s < hi and e > lo)
        worst = max(worst, pieces * fixed + PER_PAGE_US * (hi - lo))
    return worst


def rows(shapes: Sequence[Shape], config: Mapping[str, object], kind: str, fixeds: Sequence[float],
         max_splits: int) -> list[str]:
    """The markdown table: per trial and ``fixed``, each schedule's modelled call time (us) and its change."""
    out = ["| trial | busiest / mean pages today | fixed us per CTA | today us | uniform us (chunk) | bins us |",
           "|---|---|---|---|---|---|"]
    for sh in shapes:
        works = today_works(sh, config, kind)
        mean = sum(works) / max(1, sum(1 for w in works if w > 0))
        for f in fixeds:
            over = ONE_WAVE_US - f  # the call's own share of the one-wave fixed cost
            t = over + makespan(works, f)
            u, c = best_uniform(sh, f, max_splits)
            b = over + bins_makespan(sh, f)
            out.append(f"| {sh.name} | {max(works) / mean:.2f} | {f:g} | {t:.1f} | {over + u:.1f} ({c}, "
                       f"{(over + u) / t - 1:+.0%}) | {b:.1f} ({b / t - 1:+.0%}) |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default="v66_cute", help="a CuTe MLA version whose CONFIG and kind make 'today'")
    ap.add_argument("--trials", default="decode,serve_tp8,serve_tp4,serve_tp2,serve_ragged,serve_mtp4,"
                                        "serve_spec_tp8,serve_b256")
    ap.add_argument("--fixed", default="4,8,12", help="per-CTA fixed costs to sweep, us (the rest of 23.3 us is "
                                                       "the call's)")
    ap.add_argument("--max-splits", type=int, default=6, help="the uniform schedule's grid depth (splits per row "
                                                               "block, even)")
    args = ap.parse_args(argv)
    if args.max_splits < 2 or args.max_splits % 2:
        ap.error(f"--max-splits must be an even number >= 2 (got {args.max_splits}): the uniform schedule pairs "
                 "its splits.")
    sys.path.insert(0, str(ROOT))
    from pytest_kforge.registry import load_kernel, load_version

    kernel = load_kernel("mla", ROOT / "kernels")
    version = load_version("mla", args.version, ROOT / "kernels")
    kind = _kind_of(version)
    if kind is None:
        ap.error(f"{args.version} is not a version_functions CuTe version (no kernel kind in its run); pick one such "
                 "as v59_cute or v66_cute.")
    trials = kernel.spec.trials
    unknown = [t for t in args.trials.split(",") if t not in trials]
    if unknown:
        ap.error(f"unknown trial(s) {', '.join(unknown)}; the MLA spec has {', '.join(trials)}.")
    shapes = [shape_of(t, trials[t]) for t in args.trials.split(",")]
    print("\n".join(rows(shapes, version.config, kind, [float(x) for x in args.fixed.split(",")],
                         args.max_splits)))
    return 0


def _kind_of(version: object) -> str | None:
    """The kernel kind a ``version_functions`` version runs (its ``run`` closure's ``kind``), or None."""
    run = getattr(version.module, "run", None)  # type: ignore[attr-defined]
    code = getattr(run, "__code__", None)
    if code is None:
        return None
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in run.__closure__ or ())))
    kind = cells.get("kind")
    return kind if isinstance(kind, str) else None


if __name__ == "__main__":
    raise SystemExit(main())
