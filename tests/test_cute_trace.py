"""The timeline probe's analysis (kernels/mla/tools/cute_trace.py) on synthetic clock records, on the CPU."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from tests.test_kernels_cute import _host

PERIOD, T0 = 7000, 2**32 - 50_000  # the clock wraps inside the records


def _trace():
    _host()  # makes kforge_kernels.mla importable
    return importlib.import_module("kforge_kernels.mla.tools.cute_trace")


def _layout():
    _host()
    return importlib.import_module("kforge_kernels.mla.cute.trace_layout")


def _records(tr, ctas: int = 3, pages: int = 16) -> np.ndarray:
    """CTAs whose pairs start every PERIOD cycles, event e of WG w at 100 * e + 10 * w after the start."""
    rec = np.zeros((ctas, tr.TRACE_PER_CTA), dtype=np.int64)
    for c in range(ctas):
        base = T0 + 1000 * c
        rec[c, 0:2] = base
        rec[c, 2:4] = base + 300  # Q landed
        pairs = (pages + 1) // 2
        for w in (0, 1):
            for k in range(pairs):
                for e in range(tr.TRACE_EVENTS):
                    rec[c, tr.TRACE_HDR + (w * tr.TRACE_PAIRS + k) * tr.TRACE_EVENTS + e] = (
                        base + 500 + k * PERIOD + 100 * e + 10 * w)
        rec[c, 4:6] = base + 500 + pairs * PERIOD  # loop end
        rec[c, 6:8] = base + 500 + pairs * PERIOD + 2000  # epilogue end
        rec[c, 8] = 2**32 - 1000  # global timer (ns) at WG0's start, wrapping too; 1800 MHz inside the kernel
        rec[c, 9] = rec[c, 8] + (rec[c, 6] - rec[c, 0]) * 1000 // 1800
        prod = tr.TRACE_HDR + 2 * tr.TRACE_PAIRS * tr.TRACE_EVENTS
        for p in range(pages):
            rec[c, prod + 2 * p] = base + 500 + (p // 2 - 1) * PERIOD + 3000 + 1000 * (p % 2)
            rec[c, prod + 2 * p + 1] = rec[c, prod + 2 * p] + 50
    return ((rec + 2**31) % 2**32 - 2**31).astype(np.int32)  # as the GPU's int32 words


def test_analyse_reads_periods_offsets_and_producer_through_a_clock_wrap() -> None:
    tr = _trace()
    res = tr.analyse(_records(_layout()), 16)
    assert res["ctas"] == 3 and res["pairs"] == 8
    assert res["pair_period"] == PERIOD
    assert res["cta"]["start_to_q_landed"] == 300 and res["cta"]["q_landed_to_first_pair"] == 200
    assert res["cta"]["page_loop"] == 8 * PERIOD and res["cta"]["epilogue"] == 2000
    assert res["sm_mhz_in_kernel"] == pytest.approx(1800, rel=1e-3)
    by = {(r["wg"], r["event"]): r["median"] for r in res["events"]}
    assert by[(0, 0)] == 0 and by[(0, 7)] == 700 and by[(1, 3)] == 310
    # page 2k+2 (next A) got its slots at pair k's start + 3000, page 2k+3 (next B) at + 4000
    assert res["producer"] == {"next A first slot": 3000, "next A last slot": 3050,
                               "next B first slot": 4000, "next B last slot": 4050}


def test_analyse_short_split_has_no_period() -> None:
    tr = _trace()
    res = tr.analyse(_records(_layout(), pages=4), 4)
    assert res["pairs"] == 2 and res["pair_period"] is None


def test_probe_refuses_a_kind_without_the_probe(capsys: pytest.CaptureFixture[str]) -> None:
    tr = _trace()
    pytest.importorskip("torch")
    assert tr.main(["--kind", "sm90_seesaw_ownp_evict"]) == 2
    assert "not a probe kind" in capsys.readouterr().out


def test_analyse_leaves_unwritten_pairs_out() -> None:
    """A split of 2 pages has no middle pair (no event rows); a CTA with fewer pages than the others
    (a ragged last split) adds no zeros to the medians."""
    tr, lay = _trace(), _layout()
    assert tr.analyse(_records(lay, pages=2), 2)["events"] == []
    recs = _records(lay, ctas=4, pages=16)
    short = _records(lay, ctas=1, pages=8)  # this CTA wrote 4 pairs of the 8
    res = tr.analyse(np.concatenate([recs, short]), 16)
    assert res["pair_period"] == PERIOD
    assert {(r["wg"], r["event"]): r["median"] for r in res["events"]}[(0, 7)] == 700


def test_analyse_leaves_out_events_a_kind_never_stamps() -> None:
    """A ring probe (_cute_ringprobe) stamps only events 0-2: the others are absent, not NaN rows."""
    lay = _layout()
    rec = _records(lay).astype(np.int64)
    for w in (0, 1):
        for k in range(lay.TRACE_PAIRS):
            for e in range(3, lay.TRACE_EVENTS):
                rec[:, lay.TRACE_HDR + (w * lay.TRACE_PAIRS + k) * lay.TRACE_EVENTS + e] = 0  # never written
    res = _trace().analyse(rec.astype(np.int32), 16)
    assert {(r["wg"], r["event"]) for r in res["events"]} == {(w, e) for w in (0, 1) for e in range(3)}
    assert res["pair_period"] == PERIOD and not any(np.isnan(r["median"]) for r in res["events"])


def test_analyse_reads_only_the_records_a_persistent_grid_wrote() -> None:
    """A persistent grid (one CTA per SM) writes its CTAs' records (each one's last tile); the buffer is sized for
    one CTA per tile and the rest stays zero: those rows must not count as zero-length spans."""
    tr = _trace()
    written = _records(_layout(), ctas=3)
    recs = np.concatenate([written, np.zeros((9, written.shape[1]), dtype=np.int32)])
    res = tr.analyse(recs, 16)
    assert res["ctas"] == 3
    assert res["cta"]["start_to_q_landed"] == 300 and res["cta"]["epilogue"] == 2000


def test_analyse_names_events_with_a_kinds_own_labels() -> None:
    """A schedule that moved an event (the B-first pair with m1_first stamps m1 at event 5) names it its way."""
    tr = _trace()
    res = tr.analyse(_records(_layout()), 16, {5: ("m1 arrived", "m1 published")})
    names = {(r["wg"], r["event"]): r["name"] for r in res["events"]}
    assert names[(0, 5)] == "m1 arrived" and names[(1, 5)] == "m1 published"
    assert names[(0, 3)] == tr.EVENTS[3][0]  # the others keep the shared names


def test_analyse_leaves_out_producer_words_a_kind_never_writes() -> None:
    """v51_cute's consumers reload the pages, so its producer writes no slot words after the first pass: no
    producer rows, not NaN ones."""
    lay = _layout()
    rec = _records(lay).astype(np.int64)
    prod = lay.TRACE_HDR + 2 * lay.TRACE_PAIRS * lay.TRACE_EVENTS
    rec[:, prod:prod + 2 * lay.TRACE_PAGES] = 0
    res = _trace().analyse(rec.astype(np.int32), 16)
    assert res["producer"] == {} and res["pair_period"] == PERIOD
