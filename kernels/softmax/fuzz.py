"""Hypothesis shape strategy for the row softmax (odd column counts, single rows, wide rows)."""

from __future__ import annotations

from typing import Any


def hypothesis_params(spec: Any, *, small: bool = False) -> Any:
    from hypothesis import strategies as st

    max_rows, max_cols = (64, 2048) if small else (4096, 32768)
    return st.fixed_dictionaries({
        "params": st.fixed_dictionaries({"rows": st.integers(1, max_rows), "cols": st.integers(1, max_cols)}),
    })
