"""v5_cute: v4_cute with the two GEMMs of each loop trip swapped, so KV stages are freed early.

v4_cute's H200 profile (tensor pipe 41%, 3.0 us per page on spec vs ~1.7 us of tensor + softmax
work) pointed at the pipeline, not the math: it issued page j's QK^T before page j-1's PV, so
page j-1's stage went back to the producer only after that PV -- half-way through trip j -- and
with 2 stages the TMA load of page j+1 (72 KB, ~1 us) then sat exposed on the critical path of
every page.  v5_cute issues page j-1's PV first, then waits for page j and issues its QK^T:
the PV completes first, its stage is released at once, and the load of page j+1 overlaps QK^T,
softmax and the P exchange of page j.  The softmax no longer overlaps tensor work (both GEMMs are
done when it starts); the "both WGs done reading P" barrier disappears (the max exchange already
follows both WGs' wait for their PV).

Prediction (before the H200 run): spec 1527 -> 900-1050 us, decode 114.9 -> 75-90 us (main kernel
~65-75 us + the 9.8 us combine).  If the load were not the problem, the swap would cost the
softmax overlap and make both slower.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kforge_kernels.mla.cute.host import SM90_FEATURES

LANGUAGE = "cute-dsl"
PARENT = "v4_cute"
DESCRIPTION = "v4_cute with PV of page j issued before QK^T of page j+1: KV stages freed early, TMA latency hidden"
# knowledge-base optimisations this version applies (the profile does not recommend them again)
FEATURES = SM90_FEATURES + ("release-stage-before-next-gemm",)
CONFIG: dict[str, Any] = {
    # KV splits per (sequence, 64-row block); 0 = pick the fewest that fill 132 SMs
    "num_splits": 0,
    # Q 72 KB + 2 pages 144 KB + P 8 KB = 226 KB of the 227 KB a CTA may use
    "stages": 2,
    "sm_count": 132,
}


def supports(params: Mapping[str, int]) -> str | None:
    """Covers the whole contract: any h (rows are padded to 64), s >= 1, any lengths >= s."""
    return None


def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None) -> None:
    """Compile, without launching, what ``run`` needs for ``params`` (warm-up off the GPU)."""
    from kforge_kernels.mla.cute.host import prepare_version

    prepare_version("sm90_pvfirst", CONFIG, params, config)


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    from kforge_kernels.mla.cute.host import run_version

    return run_version("v5_cute", "sm90_pvfirst", CONFIG, q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, config)
