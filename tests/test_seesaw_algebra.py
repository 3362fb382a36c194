"""The seesaw schedule's algebra (kernels/mla/cute/seesaw.py), modelled in numpy on the CPU.

The GPU self-check and the harness test the kernel itself; this pins down the per-pair update the
kernel implements -- two warpgroups, one shared running max exchanged as two slots, scales
recomputed by each side, P_A taken relative to m0 for O_R, an odd last page and rows that see no
key -- so a change to the schedule can be checked against exact softmax before it costs GPU time.
"""

from __future__ import annotations

import numpy as np
import pytest

NEG = -np.inf


def _exp(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    safe = np.where(np.isneginf(m), 0.0, m)  # the kernel's "keep exp2 finite" rule
    return np.exp2(x - safe[:, None]) if x.ndim == 2 else np.exp2(x - safe)


def _start(s_pages: list[np.ndarray], v_pages: list[np.ndarray]) -> tuple:
    """V's half width, zeroed O halves and row-sum halves (one per warpgroup)."""
    rows, half = s_pages[0].shape[0], v_pages[0].shape[1] // 2
    return half, np.zeros((rows, half)), np.zeros((rows, half)), np.zeros(rows), np.zeros(rows)


def _pairs(s_pages: list[np.ndarray], v_pages: list[np.ndarray]):
    """(k, S_A, V_A, has page B, S_B) per pair; an odd last page pairs with an all -inf S_B."""
    for k in range(0, len(s_pages), 2):
        has_b = k + 1 < len(s_pages)
        yield k, s_pages[k], v_pages[k], has_b, s_pages[k + 1] if has_b else np.full_like(s_pages[k], NEG)


def _softmax_a(s_a: np.ndarray, v_al: np.ndarray, m_a: np.ndarray, sum_a: np.ndarray, o_l: np.ndarray) -> tuple:
    """WG0's step in both schedules: raise the max by page A's rows, P_A, row sum and O_L += P_A V_AL."""
    m0 = np.maximum(m_a, s_a.max(axis=1))
    scale0 = _exp(m_a, m0)
    p_a = _exp(s_a, m0)
    return m0, p_a, sum_a * scale0 + p_a.sum(axis=1), o_l * scale0[:, None] + p_a @ v_al


def _seesaw(s_pages: list[np.ndarray], v_pages: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the pair loop of MlaSplitSm90Seesaw._seesaw_consumer; returns O (unnormalised), row sum, max."""
    half, o_l, o_r, sum_a, sum_b = _start(s_pages, v_pages)
    m_a, m_b = np.full(len(sum_a), NEG), np.full(len(sum_a), NEG)  # the shared max as each warpgroup knows it
    for k, s_a, v_a, has_b, s_b in _pairs(s_pages, v_pages):
        # WG0: S_A, softmax against its max, publish m0 and P_A
        m0, p_a, sum_a, o_l = _softmax_a(s_a, v_a[:, :half], m_a, sum_a, o_l)
        # WG1: adopt m0, O_R += P_A V_AR (P_A relative to m0), then its own page
        adopt0 = _exp(m_b, m0)
        sum_b, o_r = sum_b * adopt0, o_r * adopt0[:, None] + p_a @ v_a[:, half:]
        m1 = np.maximum(m0, s_b.max(axis=1))
        scale1 = _exp(m0, m1)
        p_b = _exp(s_b, m1)
        sum_b = sum_b * scale1 + p_b.sum(axis=1)
        o_l, o_r, sum_a = _close_pair(o_l, o_r, sum_a, scale1, p_b, v_pages[k + 1] if has_b else None, half)
        m_a = m_b = m1
    return np.concatenate([o_l, o_r], axis=1), sum_a + sum_b, m_a


def _close_pair(o_l, o_r, sum_a, scale1, p_b, v_b, half: int) -> tuple:
    """Both O halves and WG0's row sum to m1 (factor ``scale1``), then P_B V_B (no page B: ``v_b`` None)."""
    o_l, o_r, sum_a = o_l * scale1[:, None], o_r * scale1[:, None], sum_a * scale1
    if v_b is not None:
        o_l, o_r = o_l + p_b @ v_b[:, :half], o_r + p_b @ v_b[:, half:]
    return o_l, o_r, sum_a


@pytest.mark.parametrize("n_pages", [1, 2, 3, 6, 7])
def test_seesaw_pairs_equal_softmax(n_pages: int) -> None:
    rng = np.random.default_rng(n_pages)
    rows, page, dv = 16, 8, 12
    s_pages = [rng.normal(size=(rows, page)) * 4 for _ in range(n_pages)]
    v_pages = [rng.normal(size=(page, dv)) for _ in range(n_pages)]
    # causal-style masks: row 0 sees nothing in page 0, row 1 nothing at all, row 2 only the last key
    s_pages[0][0] = NEG
    for s in s_pages:
        s[1] = NEG
        s[2] = NEG
    s_pages[-1][2, -1] = 1.0
    o, total, m = _seesaw(s_pages, v_pages)
    s_all, v_all = np.concatenate(s_pages, axis=1), np.concatenate(v_pages, axis=0)
    seen = ~np.isneginf(s_all).all(axis=1)
    ref_m = np.where(seen, s_all.max(axis=1), NEG)
    p = _exp(s_all, ref_m)
    np.testing.assert_allclose(total, p.sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(m, ref_m)
    out = np.divide(o, total[:, None], out=np.zeros_like(o), where=total[:, None] > 0)
    ref = np.divide(p @ v_all, p.sum(axis=1)[:, None], out=np.zeros_like(o), where=seen[:, None])
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
    assert not np.isnan(out).any() and (out[1] == 0).all() and total[1] == 0  # a row with no key: 0, lse -inf


def _stagger(s_pages: list[np.ndarray], v_pages: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pair loop of MlaSplitSm90Stagger._stagger_consumer (v15_cute..v17_cute): WG1 rescales O_R once
    per pair, by e(m - m1), and receives P_A already multiplied by e(m0 - m1)."""
    half, o_l, o_r, sum_a, sum_b = _start(s_pages, v_pages)
    m_a, m_b = np.full(len(sum_a), NEG), np.full(len(sum_a), NEG)
    for k, s_a, v_a, has_b, s_b in _pairs(s_pages, v_pages):
        # WG0: softmax of A, O_L += P_A V_AL from registers
        m0, p_a, sum_a, o_l = _softmax_a(s_a, v_a[:, :half], m_a, sum_a, o_l)
        # WG1: adopt m0 (scale), softmax of B (scale2), one rescale of O_R by their product
        adopt = _exp(m_b, m0)
        sum_b = sum_b * adopt
        m1 = np.maximum(m0, s_b.max(axis=1))
        scale2 = _exp(m0, m1)
        p_b = _exp(s_b, m1)
        sum_b = sum_b * scale2 + p_b.sum(axis=1)
        o_r = o_r * (adopt * scale2)[:, None]
        if has_b:
            o_r = o_r + p_b @ v_pages[k + 1][:, half:]
        # WG0 learns m1: P_A' = P_A e(m0 - m1) goes to WG1, O_L and its row sum follow
        s1 = _exp(m0, m1)
        o_r = o_r + (p_a * s1[:, None]) @ v_a[:, half:]
        sum_a, o_l = sum_a * s1, o_l * s1[:, None]
        if has_b:
            o_l = o_l + p_b @ v_pages[k + 1][:, :half]
        m_a = m_b = m1
    return np.concatenate([o_l, o_r], axis=1), sum_a + sum_b, m_a


@pytest.mark.parametrize("n_pages", [1, 2, 5, 6])
def test_stagger_pairs_equal_seesaw(n_pages: int) -> None:
    """The staggered schedule computes what the seesaw computes (which equals exact softmax, above)."""
    rng = np.random.default_rng(10 + n_pages)
    rows, page, dv = 12, 8, 10
    s_pages = [rng.normal(size=(rows, page)) * 4 for _ in range(n_pages)]
    v_pages = [rng.normal(size=(page, dv)) for _ in range(n_pages)]
    s_pages[0][0] = NEG
    for s in s_pages:
        s[1] = NEG
    got, want = _stagger(s_pages, v_pages), _seesaw(s_pages, v_pages)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert not np.isnan(got[0]).any() and got[1][1] == 0


@pytest.mark.parametrize("n_pages", [1, 2, 3, 7])
def test_softmax_first_wg1_equals_seesaw(n_pages: int) -> None:
    """v25_cute (_cute_seesaw_soft1): WG1 runs page B's softmax first, moves O_R to m1 in one rescale and
    reads P_A back scaled by e(m0 - m1) -- the WG1 algebra of ``_stagger`` (WG1 does the P_A scaling
    there too; who multiplies does not change the sum), with WG0 unchanged.  v44_cute (_cute_seesaw_bfirst) is
    ``_stagger``'s algebra with WG0 doing the multiply, so this also covers it.  Odd page counts cover
    the pair without page B (all -inf S_B: scale 1, P_B 0)."""
    rng = np.random.default_rng(30 + n_pages)
    rows, page, dv = 10, 8, 6
    s_pages = [rng.normal(size=(rows, page)) * 5 for _ in range(n_pages)]
    v_pages = [rng.normal(size=(page, dv)) for _ in range(n_pages)]
    s_pages[0][3] = NEG  # a row that sees no key in page A of the first pair
    for s in s_pages:
        s[4] = NEG  # a row that never sees a key
    got, want = _stagger(s_pages, v_pages), _seesaw(s_pages, v_pages)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert not np.isnan(got[0]).any() and got[1][4] == 0


def _provisional(s_pages: list[np.ndarray], v_pages: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v30_cute (``wg1_provisional``): WG1 turns S_B into P' against its own max m' = max(m, rowmax S_B)
    before m0 exists, then m1 = max(m0, m'), P_B = P' e(m' - m1), sum_B = sum_B e(m0 - m1) + sum(P') e(m' - m1)
    (``SeesawOps._softmax_provisional`` / ``_publish_b_provisional``); WG0 unchanged."""
    half, o_l, o_r, sum_a, sum_b = _start(s_pages, v_pages)
    m_a, m_b = np.full(len(sum_a), NEG), np.full(len(sum_a), NEG)
    for k, s_a, v_a, has_b, s_b in _pairs(s_pages, v_pages):
        # WG1, before m0: its own max, P' and P's row sums (the factor times 0 never NaN)
        m_prov = np.maximum(m_b, s_b.max(axis=1))
        p_prov = _exp(s_b, m_prov)
        sums = 0.0 * _exp(m_b, m_prov) + p_prov.sum(axis=1)
        # WG0 as in the seesaw
        m0, p_a, sum_a, o_l = _softmax_a(s_a, v_a[:, :half], m_a, sum_a, o_l)
        # WG1: adopt m0, O_R += P_A V_AR, then bring P' to m1
        adopt0 = _exp(m_b, m0)
        sum_b, o_r = sum_b * adopt0, o_r * adopt0[:, None] + p_a @ v_a[:, half:]
        m1 = np.maximum(m0, m_prov)
        f, scale1 = _exp(m_prov, m1), _exp(m0, m1)
        assert (f <= 1).all()  # P' only ever shrinks: no overflow from the late max
        p_b = p_prov * f[:, None]
        sum_b = sum_b * scale1 + sums * f
        o_l, o_r, sum_a = _close_pair(o_l, o_r, sum_a, scale1, p_b, v_pages[k + 1] if has_b else None, half)
        m_a = m_b = m1
    return np.concatenate([o_l, o_r], axis=1), sum_a + sum_b, m_a


@pytest.mark.parametrize("n_pages", [1, 2, 3, 6, 7])
def test_provisional_wg1_max_equals_seesaw(n_pages: int) -> None:
    """v30_cute computes what the seesaw computes (exact softmax, above): rows that see no key in page
    A, in page B, or at all, an odd last page (S_B all -inf: P' 0, m' = m), and page B's max both
    above and below page A's."""
    rng = np.random.default_rng(50 + n_pages)
    rows, page, dv = 12, 8, 6
    s_pages = [rng.normal(size=(rows, page)) * 5 for _ in range(n_pages)]
    v_pages = [rng.normal(size=(page, dv)) for _ in range(n_pages)]
    for k, s in enumerate(s_pages):
        s[4] = NEG  # never a key
        s[5] += 30.0 if k % 2 else -30.0  # page B's max far above page A's (P' shrinks a lot)
        s[6] += -30.0 if k % 2 else 30.0  # ... and far below (f = 1)
    s_pages[0][3] = NEG  # no key in the first page A
    if n_pages > 1:
        s_pages[1][7] = NEG  # no key in the first page B
    got, want = _provisional(s_pages, v_pages), _seesaw(s_pages, v_pages)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert not np.isnan(got[0]).any() and got[1][4] == 0


def _ref(m: np.ndarray) -> np.ndarray:
    """The reference a row's P is taken against: its max, or 0 while it has seen no key."""
    return np.where(np.isneginf(m), 0.0, m)


def _stale(s_pages: list[np.ndarray], v_pages: list[np.ndarray], dtype=np.float64):
    """The stale-max seesaw (``_cute_seesaw_stale``, v57_cute's first kernel): both warpgroups take pair k's P against m_k, the
    max of every page before the pair (pair 0: rowmax S_A, which WG1 waits for once), so P may exceed 1; O and
    the row sums are rescaled once per pair, to the max including the pair.  Returns O (unnormalised), the row
    sum, the max, and the rows v57_cute's epilogue poisons for the exact redo launch (l < 0.5 or anything not finite)."""
    half, o_l, o_r, sum_a, sum_b = (x.astype(dtype) if isinstance(x, np.ndarray) else x
                                    for x in _start(s_pages, v_pages))
    m = None
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for k, s_a, v_a, has_b, s_b in _pairs(s_pages, v_pages):
            rm_a, rm_b = s_a.max(axis=1), s_b.max(axis=1)
            m = rm_a if m is None else m  # pair 0: page A's max, published through barrier S0 as today
            p_a = np.exp2((s_a - _ref(m)[:, None]).astype(dtype))
            p_b = np.exp2((s_b - _ref(m)[:, None]).astype(dtype))
            sum_a, sum_b = sum_a + p_a.sum(axis=1, dtype=dtype), sum_b + p_b.sum(axis=1, dtype=dtype)
            v_b = v_pages[k + 1] if has_b else np.zeros_like(v_a)
            o_l = o_l + (p_a @ v_a[:, :half] + p_b @ v_b[:, :half]).astype(dtype)
            o_r = o_r + (p_a @ v_a[:, half:] + p_b @ v_b[:, half:]).astype(dtype)
            m_next = np.maximum(m, np.maximum(rm_a, rm_b))
            f = np.exp2((_ref(m) - _ref(m_next)).astype(dtype))  # the one rescale of the pair
            o_l, o_r, sum_a, sum_b = o_l * f[:, None], o_r * f[:, None], sum_a * f, sum_b * f
            m = m_next
        o, total = np.concatenate([o_l, o_r], axis=1), sum_a + sum_b
        seen = ~np.isneginf(m)
        redo = seen & ((total < 0.5) | ~np.isfinite(total) | ~np.isfinite(o).all(axis=1))
    return o, total, m, redo


@pytest.mark.parametrize("n_pages", [1, 2, 3, 6, 7])
def test_stale_max_equals_seesaw(n_pages: int) -> None:
    """With no overflow the stale max is exact: same O, sums and max as the seesaw (itself exact softmax), rows
    with no key in the first page, in a page B, or at all, maxima rising and falling by 30 within pairs, and
    l >= 1 for every row that saw a key, so nothing is sent to the exact kernel."""
    rng = np.random.default_rng(80 + n_pages)
    rows, page, dv = 12, 8, 6
    s_pages = [rng.normal(size=(rows, page)) * 5 for _ in range(n_pages)]
    v_pages = [rng.normal(size=(page, dv)) for _ in range(n_pages)]
    for k, s in enumerate(s_pages):
        s[4] = NEG
        s[5] += 30.0 if k % 2 else -30.0  # page B's max ~60 above page A's: P_B up to ~2^60 before the rescale
        s[6] += -30.0 if k % 2 else 30.0
    s_pages[0][3] = NEG
    if n_pages > 1:
        s_pages[1][7] = NEG
    o, total, m, redo = _stale(s_pages, v_pages)
    want = _seesaw(s_pages, v_pages)
    for g, w in zip((o, total, m), want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    seen = ~np.isneginf(m)
    assert not redo.any() and (total[seen] >= 1 - 1e-12).all() and total[4] == 0


def test_stale_max_fp32_sends_only_the_overflowing_rows_to_the_exact_kernel() -> None:
    """In fp32, as the kernel runs: a max that rises by 200 (log2 units) inside one pair overflows P and is
    flagged; a row whose first finite scores are ~-300 after a masked first page underflows against the
    reference 0 and is flagged; ordinary rows, even with a rise of 60 inside a pair, are exact and not flagged."""
    rng = np.random.default_rng(7)
    rows, page, dv = 6, 8, 4
    s_pages = [rng.normal(size=(rows, page)) * 4 for _ in range(4)]
    v_pages = [rng.normal(size=(page, dv)) for _ in range(4)]
    s_pages[1][1] += 60.0  # row 1: page B of pair 0 rises by ~60: P_B ~2^60, fine in fp32
    s_pages[3][2] += 200.0  # row 2: page B of pair 1 rises by ~200: 2^200 overflows fp32
    s_pages[0][3] = NEG  # row 3: page A of pair 0 masked (reference 0), then scores near -300
    s_pages[1][3] = s_pages[1][3] - 300.0
    s_pages[2][3] -= 300.0
    s_pages[3][3] -= 300.0
    o, total, m, redo = _stale(s_pages, v_pages, dtype=np.float32)
    assert redo.tolist() == [False, False, True, True, False, False]
    want_o, want_total, _ = _seesaw(s_pages, v_pages)
    ok = ~redo
    np.testing.assert_allclose(o[ok] / total[ok, None], want_o[ok] / want_total[ok, None], rtol=2e-5, atol=1e-6)
