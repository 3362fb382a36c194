"""Hypothesis shape strategy for MLA decode correctness (used by the harness's ``test_fuzz``).

Covers what breaks paged-attention kernels: per-sequence cache lengths that differ, are not
multiples of the 64-row page and can be shorter than one page; shuffled block tables (the spec
always shuffles); draft windows s = 1..16; head counts 16, 32, 64, 128.
"""

from __future__ import annotations

from typing import Any


def hypothesis_params(spec: Any, *, small: bool = False) -> Any:
    from hypothesis import strategies as st

    max_b, max_t = (2, 200) if small else (8, 5000)

    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        b = draw(st.integers(1, max_b))
        s = draw(st.integers(1, 16))
        h = draw(st.sampled_from([16, 32, 64, 128]))
        lens = draw(st.lists(st.integers(s, max_t), min_size=b, max_size=b))
        return {"params": {"b": b, "s": s, "t": max(lens), "h": h}, "input_kwargs": {"seqlens": lens}}

    return case()
