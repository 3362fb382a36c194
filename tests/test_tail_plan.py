"""v54_cute's tail plan (``_cute_tail_plan``): pure Python, so it runs on the CPU CI.

What the kernel relies on: the pieces cover every page of every tail tile exactly once, a tile's
pieces have slots 0..parts-1, no tile has more than MAX_PARTS pieces, and the bins (an SM's pieces)
cost about the same.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path

import pytest

from pytest_kforge.registry import load_version

KDIR = Path(__file__).resolve().parents[1] / "kernels"


def _plan_module():
    load_version("mla", "v0", kernels_dir=KDIR)  # makes kforge_kernels.mla importable
    return importlib.import_module("kforge_kernels.mla.cute.tail_plan")


@pytest.mark.parametrize("n_tiles,pages", [(1024, 64), (133, 64), (200, 64), (265, 64), (1000, 17), (2048, 64),
                                           (4096, 65), (300, 2)])
def test_pieces_cover_the_tail_once_with_consistent_slots(n_tiles: int, pages: int) -> None:
    tp = _plan_module()
    plan = tp.plan_tail(n_tiles, pages)
    assert 0 <= plan.full < n_tiles or not plan.pieces
    by_tile = defaultdict(list)
    for p in plan.pieces:
        assert 0 <= p.p_begin < p.p_end <= pages
        by_tile[p.tile].append(p)
    if plan.pieces:
        assert sorted(by_tile) == list(range(plan.full, n_tiles))
    for ps in by_tile.values():
        ps.sort(key=lambda p: p.p_begin)
        assert ps[0].p_begin == 0 and ps[-1].p_end == pages
        assert all(a.p_end == b.p_begin for a, b in zip(ps, ps[1:]))  # contiguous, no overlap
        assert [p.slot for p in ps] == list(range(len(ps)))
        assert {p.parts for p in ps} == {len(ps)} and len(ps) <= tp.MAX_PARTS


def test_spec_trial_keeps_seven_waves_and_balances_the_eighth() -> None:
    tp = _plan_module()
    plan = tp.plan_tail(1024, 64, sms=132, edge_pages=3.0)
    assert plan.full == 924 and plan.max_parts == 3
    first = plan.pieces[:132]  # one per bin, in page order
    assert [p.tile for p in first] == sorted(p.tile for p in first)
    # the second pieces follow, longest first
    later = [p.p_end - p.p_begin for p in plan.pieces[132:]]
    assert later == sorted(later, reverse=True)
    # each SM's bin: ~48.5 pages + 3 per piece; the most loaded bin is far below a whole tile (64 + 3)
    total = sum(p.p_end - p.p_begin for p in plan.pieces) + 3 * len(plan.pieces)
    assert total / 132 < 56


@pytest.mark.parametrize("n_tiles,pages", [(132, 64), (264, 64), (100, 64), (1024, 1)])
def test_no_tail_when_the_waves_are_full_or_there_is_nothing_to_cut(n_tiles: int, pages: int) -> None:
    plan = _plan_module().plan_tail(n_tiles, pages)
    assert plan.full == n_tiles and plan.pieces == ()


def test_table_rows_name_block_sequence_range_slot_and_parts() -> None:
    tp = _plan_module()
    plan = tp.plan_tail(1024, 64)
    words = plan.table(32)
    assert len(words) == tp.ITEM_WORDS * len(plan.pieces)
    p = plan.pieces[0]
    assert words[:6] == [p.tile % 32, p.tile // 32, p.p_begin, p.p_end, p.slot, p.parts]


def test_tail_kind_roles_per_grid() -> None:
    """The direct grid triggers the dependent launch, the tail grid merges, a merging pair (decode) is v35_cute's."""
    pytest.importorskip("cutlass.cute")
    _plan_module()  # makes kforge_kernels.mla importable
    kinds = importlib.import_module("kforge_kernels.mla.cute.kinds")
    cls = kinds.kernel_class("sm90_seesaw_pair_tail")
    direct, tail, pair = cls(16, 128, direct=True), cls(16, 128), cls(1, 128, direct=True, paired=True)
    assert (direct.work_table, direct.pdl_trigger, direct.fused_combine) == (True, True, False)
    assert (tail.work_table, tail.pdl_trigger, tail.fused_combine) == (True, False, True)
    assert (pair.work_table, pair.pdl_trigger, pair.fused_combine) == (False, False, False)
    assert kinds.tail_balanced("sm90_seesaw_pair_tail") and not kinds.tail_balanced("sm90_seesaw_pair_c3early")


def test_device_state_carries_its_own_plans_table() -> None:
    """The kernel reads the work table, not the plan: each plan's state has zeroed counters, then its own items."""
    torch = pytest.importorskip("torch")
    tp = _plan_module()
    host = importlib.import_module("kforge_kernels.mla.cute.host")
    for edge in (3.0, 10.0):
        plan = tp.plan_tail(1024, 64, edge_pages=edge)
        got, sem, opart, lpart, b_first = host.tail_buffers(plan, 32, 32, 2048, "cpu")
        assert got is plan and b_first == plan.full // 32 == 28
        assert torch.equal(sem[:1024], torch.zeros(1024, dtype=torch.int32))
        assert sem[1024:].tolist() == plan.table(32)
        assert opart.numel() == (32 - 28) * tp.MAX_PARTS * 2048 * 512 and lpart.numel() == (32 - 28) * tp.MAX_PARTS * 2048
