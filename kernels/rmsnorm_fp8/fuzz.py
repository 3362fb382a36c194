"""Hypothesis shape strategy for RMSNorm + fp8 quantisation (used by the harness's ``test_fuzz``).

Covers what breaks such kernels: a single token, token counts that are no multiple of any block,
widths from one group (128) to 16384 that are no power of two (DeepSeek's 7168 and 1536 included),
and rows of exact zeros (amax at its floor, the scale then 1e-10 / 448, ``q`` all zero).
"""

from __future__ import annotations

from typing import Any


def hypothesis_params(spec: Any, *, small: bool = False) -> Any:
    from hypothesis import strategies as st

    max_t, max_groups = (48, 16) if small else (3000, 128)
    widths = st.one_of(st.sampled_from([7168, 1536, 512, 4096]), st.integers(1, max_groups).map(lambda g: 128 * g))
    if small:
        widths = st.integers(1, max_groups).map(lambda g: 128 * g)

    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        t = draw(st.integers(1, max_t))
        d = draw(widths)
        zeros = draw(st.sampled_from([0, 0, 0, 1, 3]))
        return {"params": {"t": t, "d": d}, "input_kwargs": {"zero_rows": min(zeros, t)}}

    return case()
