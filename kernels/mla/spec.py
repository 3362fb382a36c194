"""DeepSeek-V3 MLA decode, absorbed form (as FlashMLA and FlashInfer serve it).

Inputs
    q              [b, s, h, 576] bf16   512 latent dims + 64 rope dims per query head
    kv_cache       [num_blocks, 64, 576] bf16   paged latent cache, one shared KV head;
                   V is the first 512 dims of the same rows
    block_table    [b, max_blocks] int32  page ids of each sequence, in order
    cache_seqlens  [b] int32              t_i, the cache length of sequence i (includes the s new tokens)
    softmax_scale  float                  1/sqrt(576) by default (FlashMLA/FlashInfer/TileGym);
                                          DeepSeek-V3's own 0.1352 is accepted too
Outputs
    out            [b, s, h, 512] bf16
    lse            [b, h, s] float32      natural log of the softmax denominator (scaled scores)

For s > 1 (speculative verification) attention is causal inside the draft window: query i of a
sequence of length t sees KV positions 0 .. t - s + i.

Counting (the convention every peer uses): FLOPs = 2 * s * h * sum_i(t_i) * (576 + 512), the
non-causal count (causal masking removes (s-1)/2 keys per query, 0.18% at s=16, t=4096);
minimal bytes = the KV rows each sequence needs once + q + out + lse + block table + seqlens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_kforge.spec import KernelSpec, Tolerance

D_QK = 576
D_V = 512
PAGE = 64
DEFAULT_SCALE = 1.0 / math.sqrt(D_QK)
DEEPSEEK_V3_SCALE = 0.1352


def ragged_lengths(b: int, s: int, t: int) -> list[int]:
    """``b`` cache lengths a serving scheduler might produce around a mean of ``t``: spread over [t/4, 7t/4],
    none a multiple of the 64-row page, each >= s.  Fixed for given (b, s, t), so a trial's floor, its inputs and
    every run agree."""
    import random

    rng = random.Random(f"mla-ragged:{b}:{s}:{t}")  # a str seed is hashed with sha512: the same on every machine
    lens = []
    for _ in range(b):
        n = max(s, round(t * (0.25 + 1.5 * rng.random())))
        lens.append(n + 1 if n % PAGE == 0 else n)
    return lens


def seq_lengths(params: Mapping[str, int], seqlens: Sequence[int] | None = None) -> list[int]:
    """Each sequence's cache length: ``seqlens`` when given (one per sequence, each >= s), else
    :func:`ragged_lengths` when the trial sets ``ragged=1``, else ``t`` for all."""
    b, s = int(params["b"]), int(params["s"])
    if seqlens is None and int(params.get("ragged", 0)):
        seqlens = ragged_lengths(b, s, int(params["t"]))
    lens = [int(params["t"])] * b if seqlens is None else [int(x) for x in seqlens]
    if len(lens) != b:
        raise ValueError(f"seqlens has {len(lens)} entries for b={b}")
    if min(lens) < max(s, 1):
        raise ValueError(f"every cache length must be >= s={s} (got min {min(lens)})")
    return lens


def block_layout(lens: Sequence[int]) -> tuple[list[int], int, int]:
    """The paged cache :meth:`MLADecodeSpec.make_inputs` builds for these lengths: pages per sequence,
    the block table's width and the cache's block count (1/16 spare blocks, poisoned, at least one)."""
    blocks_per_seq = [math.ceil(t / PAGE) for t in lens]
    used = sum(blocks_per_seq)
    return blocks_per_seq, max(blocks_per_seq), used + max(1, used // 16)


class MLADecodeSpec(KernelSpec):
    name = "mla"
    description = "DeepSeek-V3 MLA decode (absorbed, paged latent KV, causal draft window)"
    tags = ("mla", "attention", "online-softmax", "decode", "mqa", "paged-kv")
    input_names = ("q", "kv_cache", "block_table", "cache_seqlens", "softmax_scale")
    output_names = ("out", "lse")
    trials = {
        "decode": {"b": 32, "s": 1, "t": 4096, "h": 128},
        "spec": {"b": 32, "s": 16, "t": 4096, "h": 128},
        # long context, few sequences: stresses split-KV balance; only when asked for
        "stress": {"b": 4, "s": 2, "t": 32768, "h": 128},
        # serving shapes (issue 35), only when asked for: tensor-parallel head splits of 128 (h = 128 / TP), batch
        # 1 and 256, multi-token prediction; ragged=1 draws each sequence's length around t (ragged_lengths)
        "serve_tp8": {"b": 64, "s": 1, "t": 4096, "h": 16, "ragged": 1},
        "serve_tp4": {"b": 64, "s": 1, "t": 4096, "h": 32, "ragged": 1},
        "serve_tp2": {"b": 128, "s": 1, "t": 2048, "h": 64, "ragged": 1},
        "serve_b1": {"b": 1, "s": 1, "t": 8191, "h": 128},
        "serve_b256": {"b": 256, "s": 1, "t": 1024, "h": 128, "ragged": 1},
        "serve_ragged": {"b": 32, "s": 1, "t": 4096, "h": 128, "ragged": 1},
        "serve_mtp4": {"b": 32, "s": 4, "t": 4096, "h": 128, "ragged": 1},
        "serve_spec_tp8": {"b": 64, "s": 16, "t": 2048, "h": 16, "ragged": 1},
    }
    default_trials = ("decode", "spec")
    shrink_param = "b"
    # bf16 output: rounding alone is 2^-9 relative; P in bf16 adds ~3e-3 rel L2.
    tolerances = {
        "out": Tolerance(max_abs=3e-2, rel_l2=1e-2, rel_elem=2**-7),  # bf16: one to two steps of the value
        "lse": Tolerance(max_abs=1e-2, rel_l2=1e-3),
    }

    # ---- inputs -----------------------------------------------------------------------------
    def make_inputs(
        self,
        params: Mapping[str, int],
        *,
        seed: int,
        device: Any = "cpu",
        seqlens: Sequence[int] | None = None,
        softmax_scale: float = DEFAULT_SCALE,
        shuffle_blocks: bool = True,
    ) -> dict[str, Any]:
        """Random bf16 q and cache, a shuffled block table and the sequence lengths.

        ``seqlens`` (one per sequence, each >= s) overrides the uniform ``t``.  Spare blocks that
        no sequence owns are filled with large values, so a kernel that reads past a sequence's
        end without masking produces a visibly wrong result.
        """
        import torch

        b, s, h = int(params["b"]), int(params["s"]), int(params["h"])
        lens = seq_lengths(params, seqlens)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        blocks_per_seq, max_blocks, num_blocks = block_layout(lens)
        order = torch.randperm(num_blocks, generator=gen) if shuffle_blocks else torch.arange(num_blocks)
        block_table = torch.zeros(b, max_blocks, dtype=torch.int32)
        used = 0
        for i, nb in enumerate(blocks_per_seq):
            block_table[i, :nb] = order[used : used + nb].to(torch.int32)
            # unused slots point at a valid block (never read by a correct kernel)
            block_table[i, nb:] = order[used].to(torch.int32)
            used += nb
        q = torch.randn(b, s, h, D_QK, generator=gen).to(torch.bfloat16)
        kv = torch.randn(num_blocks, PAGE, D_QK, generator=gen)
        kv[order[used:]] = 30.0  # spare blocks: poison for unmasked reads
        kv = kv.to(torch.bfloat16)
        return {
            "q": q.to(device),
            "kv_cache": kv.to(device),
            "block_table": block_table.to(device),
            "cache_seqlens": torch.tensor(lens, dtype=torch.int32).to(device),
            "softmax_scale": float(softmax_scale),
        }

    def params_from_inputs(self, inputs: Mapping[str, Any]) -> dict[str, int]:
        b, s, h, _ = inputs["q"].shape
        return {"b": int(b), "s": int(s), "t": int(inputs["cache_seqlens"].max()), "h": int(h)}

    def alloc_outputs(self, params: Mapping[str, int], *, device: Any = "cpu") -> dict[str, Any]:
        import torch

        b, s, h = int(params["b"]), int(params["s"]), int(params["h"])
        return {
            "out": torch.empty(b, s, h, D_V, dtype=torch.bfloat16, device=device),
            "lse": torch.empty(b, h, s, dtype=torch.float32, device=device),
        }

    # ---- reference --------------------------------------------------------------------------
    def reference(self, inputs: Mapping[str, Any], *, dtype: Any = None) -> dict[str, Any]:
        """Dense attention over the gathered cache in ``dtype`` (float32 default)."""
        import torch

        dtype = dtype or torch.float32
        q, cache = inputs["q"], inputs["kv_cache"]
        bt, lens = inputs["block_table"].long(), inputs["cache_seqlens"].long()
        scale = float(inputs["softmax_scale"])
        b, s, h, _ = q.shape
        tmax = int(lens.max())
        pos = torch.arange(tmax, device=q.device)
        rows = cache[bt[:, pos // PAGE], pos % PAGE].to(dtype)  # [b, tmax, 576]
        scores = torch.einsum("bshd,btd->bsht", q.to(dtype), rows) * scale
        limit = lens[:, None] - s + torch.arange(s, device=q.device)[None, :]  # [b, s] last visible pos
        masked = pos[None, None, :] > limit[:, :, None]  # [b, s, t]
        scores = scores.masked_fill(masked[:, :, None, :], float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)  # [b, s, h]
        p = torch.exp(scores - lse[..., None])
        out = torch.einsum("bsht,btd->bshd", p, rows[..., :D_V])
        return {"out": out, "lse": lse.permute(0, 2, 1).contiguous()}

    # ---- counts -----------------------------------------------------------------------------
    def flops(self, params: Mapping[str, int], seqlens: Sequence[int] | None = None) -> float:
        b, s, h = (int(params[k]) for k in ("b", "s", "h"))
        total_t = sum(seq_lengths(params, seqlens))
        return 2.0 * s * h * total_t * (D_QK + D_V)

    def min_bytes(self, params: Mapping[str, int], seqlens: Sequence[int] | None = None) -> float:
        b, s, h = (int(params[k]) for k in ("b", "s", "h"))
        lens = seq_lengths(params, seqlens)
        kv = sum(lens) * D_QK * 2
        q = b * s * h * D_QK * 2
        out = b * s * h * D_V * 2
        lse = b * h * s * 4
        meta = b * math.ceil(max(lens) / PAGE) * 4 + b * 4
        return float(kv + q + out + lse + meta)


SPEC = MLADecodeSpec()
