"""Which CTA does what when a one-split grid does not fill its last wave (v54_cute's host side).

At spec (b=32, s=16, h=128) the direct kernel runs 1,024 (row block, sequence) tiles of 64 pages
each, one CTA per SM at a time: 1,024 / 132 = 7.76 waves, run as 8, so for the last ~105 us 32 of
the 132 SMs idle (runs 12 and 17: ~1.59 us per page per SM plus ~4 us of prologue and epilogue
per tile).  The plan keeps the full waves as they are (one CTA per tile, direct outputs) and
cuts the last ``tail`` tiles' pages into 132 contiguous bins of equal cost, one per SM, where
cost counts each piece's pages plus ``edge_pages`` for its Q load and epilogue.  A bin that
crosses a tile boundary becomes two pieces (two CTAs: one tile each), and the pieces of a tile
are merged by whichever finishes last.

Launch order is what makes the bins real without a persistent loop: every bin's first piece
goes first, in page order (neighbouring tiles read the same sequence's pages, so L2 serves the
repeats), then the bins' second pieces, longest first.  The SMs that free up first are those
whose first piece was shortest, and the hardware hands each the next CTA in order: the longest
second piece, its own bin's complement.

Pure Python (no GPU, no DSL): the plan is a function of the shape only, so the host computes it
once per shape and keeps the table on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

#: int32 words per work item in the device table: m_block, sequence, first page, end page, slot, parts, 2 spare
ITEM_WORDS = 8
#: the most pieces one tile can be cut into when every bin holds at least half a tile
MAX_PARTS = 4


@dataclass(frozen=True)
class Piece:
    """Pages ``[p_begin, p_end)`` of tile ``tile``; its partial goes to slot ``slot`` of the tile's ``parts``."""

    tile: int
    p_begin: int
    p_end: int
    slot: int
    parts: int


@dataclass(frozen=True)
class TailPlan:
    """Tiles ``0 .. full - 1`` run whole in the direct grid; ``pieces`` (in launch order) cover the rest."""

    full: int
    pieces: tuple[Piece, ...]

    @property
    def max_parts(self) -> int:
        return max((p.parts for p in self.pieces), default=1)

    def table(self, m_blocks: int) -> list[int]:
        """The device table: ``ITEM_WORDS`` int32 per piece, in launch order (tile = sequence * m_blocks + m_block)."""
        words: list[int] = []
        for p in self.pieces:
            words += [p.tile % m_blocks, p.tile // m_blocks, p.p_begin, p.p_end, p.slot, p.parts, 0, 0]
        return words


def _bins(tiles: int, pages: int, sms: int, cap: float, edge: float) -> list[list[tuple[int, int]]] | None:
    """Greedy contiguous bins of cost <= ``cap`` over ``tiles`` x ``pages``; None when 132 bins do not cover them."""
    total, pos, out = tiles * pages, 0, []
    for _ in range(sms):
        budget, pieces = cap, []
        while pos < total:
            room = int(budget - edge)
            if room < 1:
                break
            take = min(room, (pos // pages + 1) * pages - pos)
            pieces.append((pos, pos + take))
            pos += take
            budget -= edge + take
        out.append(pieces)
        if pos == total:
            return [b for b in out if b]
    return None


def plan_tail(n_tiles: int, pages: int, sms: int = 132, edge_pages: float = 3.0) -> TailPlan:
    """The plan for ``n_tiles`` tiles of ``pages`` pages on ``sms`` SMs (module docstring).

    No tail (every tile whole) when the tiles fill their waves, fit in one, or have under 2 pages.  A tail
    under half a wave takes one full wave with it, so every bin holds at least half a tile and a tile is
    cut into at most ``MAX_PARTS`` pieces.
    """
    if n_tiles <= sms or pages < 2 or n_tiles % sms == 0:
        return TailPlan(n_tiles, ())
    tail = n_tiles % sms
    if 2 * tail < sms:
        tail += sms
    full = n_tiles - tail
    lo, hi = tail * pages / sms, tail * pages / sms + pages + 3 * edge_pages
    for _ in range(50):  # the smallest bin cost that covers the tail (bisection)
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _bins(tail, pages, sms, mid, edge_pages) is not None else (mid, hi)
    bins = _bins(tail, pages, sms, hi, edge_pages)
    assert bins is not None
    cuts: dict[int, list[tuple[int, int]]] = {}
    for b in bins:
        for a, e in b:
            cuts.setdefault(a // pages, []).append((a, e))
    slot_of = {}
    for t, ranges in cuts.items():
        if len(ranges) > MAX_PARTS:
            raise ValueError(f"tail plan cut tile {t} into {len(ranges)} pieces (at most {MAX_PARTS}); "
                             "this shape needs a larger tail.")
        for k, (a, e) in enumerate(sorted(ranges)):
            slot_of[a] = (k, len(ranges))

    def piece(a: int, e: int) -> Piece:
        k, n = slot_of[a]
        t = a // pages
        return Piece(full + t, a - t * pages, e - t * pages, k, n)

    if all(n == 1 for _, n in slot_of.values()):
        return TailPlan(n_tiles, ())  # no tile was cut (too few pages to balance): nothing to gain
    order = [piece(*b[0]) for b in bins]
    for rank in range(1, max(len(b) for b in bins)):
        later = [piece(*b[rank]) for b in bins if len(b) > rank]
        order += sorted(later, key=lambda p: p.p_end - p.p_begin, reverse=True)
    return TailPlan(full, tuple(order))
