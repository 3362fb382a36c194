"""v7_cute: v5_cute + bf16 split partials merged by the one-pass combine (v6_cute minus its lazy rescale).

v6_cute bundled two changes and measured slower on both trials (same-run A/B on the H200: decode
96.3 -> 101.3 us, spec 1197 -> 1251 us).  Spec has one split (no partials, no combine), so its
+4.5% is the lazy rescale alone: the per-row ``alpha != 1`` branch costs more than the multiplies
it skips (cuTile's v6 lost 4.6% the same way).  v7_cute keeps only the decode-side change: bf16
partials (16.8 -> 8.4 MB written and read back) and ``_cute_combine2``'s loads issued per split
together.

Prediction (before the H200 run): spec = v5_cute (same kernel code path, within noise);
decode 96.3 -> 91-94 us (combine 9.9 -> ~6 us; main kernel writes half the bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kforge_kernels.mla.cute.host import SM90_FEATURES

LANGUAGE = "cute-dsl"
PARENT = "v5_cute"
DESCRIPTION = "v5_cute + bf16 split partials with a one-pass combine (no lazy rescale)"
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

    prepare_version("sm90_bf16p", CONFIG, params, config)


def run(q, kv_cache, block_table, cache_seqlens, softmax_scale, *, out, lse, config=None):
    from kforge_kernels.mla.cute.host import run_version

    return run_version("v7_cute", "sm90_bf16p", CONFIG, q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, config)
