"""Compile a cuTile MLA version's launches ahead of time: its ``prepare``, run outside the shared GPU's lock.

Why: when xdist workers share one GPU, each GPU section holds a file lock (``pytest_kforge.gpushare``), and a
cuTile kernel compiles at its first ``ct.launch`` of a new shape -- inside that lock, so the compiles of
every worker ran one at a time (run 24: the cuTile part took 493 s with the GPU busy in 9% of its samples).

How: ``prepare(params, config, input_kwargs)`` calls the version's own ``run`` on uninitialised tensors of
the shapes the harness will pass (``torch.empty``: no kernel runs, so nothing disturbs the worker that holds
the GPU), with :func:`preparing` set, under which ``_cutile_common.launch`` compiles instead of launching
(:func:`compile_launch`).  That goes through cuTile's own launch preparation without the launch
(``cuda.tile._cext._export_ipc_benchmark_payload``, cuda-tile 1.7: it reads the arguments as ``ct.launch``
does -- dtypes, shapes, strides, alignment, aliasing, the calling convention they need -- compiles on a
miss, keeps the kernel in the dispatcher's in-process cache and returns an IPC payload, which is dropped;
nothing is queued on a stream), so the real launch that follows finds the kernel compiled.  A launch whose
arguments differ from the prepared ones simply compiles, as before, and a prepare that fails is counted
in :data:`STATS` and left to the launch, which raises its own error if the failure was real: prepare can
cost time, never correctness.  (A first version memoised ``cuda.tile.kernel._compile`` instead; the
harness's static cheat check rightly refuses a version that assigns into an imported module, and its
signature, ``KernelSignature.from_kernel_args`` with the v1 calling convention, missed the launch's own,
which specialises on shapes when the arguments allow it.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# the prepare mode and the compile without a launch are shared by every kernel's cuTile versions
# (STATS: this process's prepared / compiled / failed counts; LAST_ERROR: the last failure, for every kernel)
from kforge_kernels._shared.cutile_prepare import LAST_ERROR, STATS, compile_launch, prepare_mode, preparing
from kforge_kernels._shared.cutile_prepare import prepare_run as _prepare_run

_DONE: set[tuple[Any, ...]] = set()  # the MLA shapes (and fuzz lengths) this process prepared
__all__ = ["compile_launch", "preparing", "prepare_mode", "empty_inputs", "prepare_run", "preparer", "STATS",
           "LAST_ERROR"]


def empty_inputs(spec: Any, params: Mapping[str, int], input_kwargs: Mapping[str, Any] | None,
                 device: Any) -> dict[str, Any]:
    """Uninitialised inputs and outputs with the shapes, dtypes and layout ``spec.make_inputs`` and
    ``spec.alloc_outputs`` give for ``params`` (and the fuzz test's ``seqlens``)."""
    import torch

    from kforge_kernels.mla import spec as mla_spec

    b, s, h = int(params["b"]), int(params["s"]), int(params["h"])
    lens = mla_spec.seq_lengths(params, (input_kwargs or {}).get("seqlens"))
    _, max_blocks, num_blocks = mla_spec.block_layout(lens)
    tensors = {
        "q": torch.empty((b, s, h, mla_spec.D_QK), dtype=torch.bfloat16, device=device),
        "kv_cache": torch.empty((num_blocks, mla_spec.PAGE, mla_spec.D_QK), dtype=torch.bfloat16, device=device),
        "block_table": torch.empty((b, max_blocks), dtype=torch.int32, device=device),
        "cache_seqlens": torch.empty((b,), dtype=torch.int32, device=device),
        "softmax_scale": float((input_kwargs or {}).get("softmax_scale", mla_spec.DEFAULT_SCALE)),
    }
    return tensors | dict(spec.alloc_outputs(params, device=device))


def prepare_run(run: Callable[..., Any], params: Mapping[str, int], config: Mapping[str, Any] | None,
                input_kwargs: Mapping[str, Any] | None = None) -> None:
    """Call ``run`` once in prepare mode on empty tensors for ``params`` (skipped when this process already
    prepared the same shapes and config)."""
    from kforge_kernels.mla.spec import SPEC

    seqlens = tuple((input_kwargs or {}).get("seqlens") or ())
    _prepare_run(run, (tuple(sorted(params.items())), seqlens),
                 lambda device: empty_inputs(SPEC, params, input_kwargs, device), config,
                 what=str(dict(params)), stats=STATS, done=_DONE, last_error=LAST_ERROR)


def preparer(run: Callable[..., Any]) -> Callable[..., None]:
    """A version module's ``prepare``: ``prepare = _cutile_prepare.preparer(run)`` at the end of the module."""

    def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None,
                input_kwargs: Mapping[str, Any] | None = None) -> None:
        """Compile this version's launches for ``params`` without launching anything (outside the GPU lock)."""
        prepare_run(run, params, config, input_kwargs)

    return prepare
