"""Compile a cuTile MLA version's launches ahead of time: its ``prepare``, run outside the shared GPU's lock.

Why: when xdist workers share one GPU, each GPU section holds a file lock (``pytest_kforge.gpushare``), and a
cuTile kernel compiles at its first ``ct.launch`` of a new shape -- inside that lock, so the compiles of
every worker ran one at a time (run 24: the cuTile part took 493 s with the GPU busy in 9% of its samples).

How: ``prepare(params, config, input_kwargs)`` calls the version's own ``run`` on uninitialised tensors of
the shapes the harness will pass (``torch.empty``: no kernel runs, so nothing disturbs the worker that holds
the GPU), with :func:`preparing` set, under which ``_cutile_common.launch`` compiles instead of launching
(:func:`compile_launch`): it derives the ``KernelSignature`` that ``ct.launch`` derives from the same
arguments (``KernelSignature.from_kernel_args``: dtypes, shapes, strides, alignment, aliasing) and calls
the kernel's ``_compile``.  :func:`install_memo` wraps ``_compile`` once per process so the real launch
that follows, which calls ``_compile`` on its JIT-cache miss, gets the result back without compiling.
A signature the prepare did not predict simply compiles at the launch, as before (counted in
:data:`STATS` as a miss), and a prepare that fails is counted and left to the launch, which raises
its own error if the failure was real: the memo can cost time, never correctness.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_PREPARING: contextvars.ContextVar[bool] = contextvars.ContextVar("kforge_cutile_preparing", default=False)
#: (id(kernel), signature key, compute capability) -> (kernel, what ``_compile`` returned)
_MEMO: dict[tuple[Any, ...], tuple[Any, Any]] = {}
#: this process's counts: prepared shapes, kernels compiled by prepare, launches served from the memo
#: (hits) and launches that compiled anyway (misses: a signature prepare did not predict)
STATS: dict[str, int] = {"prepared": 0, "compiled": 0, "hits": 0, "misses": 0, "errors": 0}
#: the last prepare failure, ``"<version run> <params>: <error>"`` (the launch reports its own)
LAST_ERROR: list[str] = []
_DONE: set[tuple[Any, ...]] = set()
_INSTALLED: list[Any] = []


def preparing() -> bool:
    """True inside :func:`prepare_run`: launches compile and return, tensors stay uninitialised."""
    return _PREPARING.get()


@contextlib.contextmanager
def _prepare_mode() -> Iterator[None]:
    token = _PREPARING.set(True)
    try:
        yield
    finally:
        _PREPARING.reset(token)


def signature_key(signature: Any) -> tuple[Any, ...]:
    """What decides the compiled code: the parameter constraints and the calling convention (not the
    symbol, which ``ct.launch`` may leave for the compiler to mangle)."""
    params = tuple(signature.parameters)
    try:
        hash(params)
    except TypeError:  # a constraint holding a list: its repr is as exact
        params = (repr(params),)
    conv = signature.calling_convention
    return params, getattr(conv, "code", repr(conv))


def install_memo(kernel_cls: Any) -> None:
    """Wrap ``kernel_cls._compile`` (``cuda.tile.kernel``) with the memo, once per process."""
    if kernel_cls in _INSTALLED:
        return
    original = kernel_cls._compile

    def _compile(self: Any, signature: Any, context: Any, compute_capability: Any = None) -> Any:
        key = (id(self), signature_key(signature), _capability(compute_capability))
        got = _MEMO.get(key)
        if got is not None:
            if not preparing():
                STATS["hits"] += 1
            return got[1]
        result = original(self, signature, context, compute_capability)
        _MEMO[key] = (self, result)  # the kernel object is kept alive, so its id stays unique
        STATS["compiled" if preparing() else "misses"] += 1
        return result

    _compile.__wrapped__ = original  # type: ignore[attr-defined]
    kernel_cls._compile = _compile
    _INSTALLED.append(kernel_cls)


def _capability(given: Any) -> tuple[int, ...]:
    """The compute capability a compile targets (``None``: the current device's, as ``_compile`` does)."""
    if given:
        return tuple(given)
    import torch
    from cuda.tile._cext import get_compute_capability

    return tuple(get_compute_capability(torch.cuda.current_device()))


def compile_launch(kernel: Any, args: tuple[Any, ...]) -> None:
    """Compile ``kernel`` for ``args`` as ``ct.launch`` would, without launching it."""
    from cuda.tile import kernel as kernel_cls
    from cuda.tile._cext import default_tile_context
    from cuda.tile.compilation import CallingConvention, KernelSignature

    install_memo(kernel_cls)
    sig = KernelSignature.from_kernel_args(kernel, args, CallingConvention.cutile_python_v1())
    kernel._compile(sig, default_tile_context, _capability(None))


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
    import torch

    from kforge_kernels.mla.spec import SPEC

    seqlens = tuple((input_kwargs or {}).get("seqlens") or ())
    key = (id(run), tuple(sorted(params.items())), seqlens, repr(sorted((config or {}).items())))
    if key in _DONE or not torch.cuda.is_available():
        return
    _DONE.add(key)
    try:
        tensors = empty_inputs(SPEC, params, input_kwargs, torch.device("cuda", torch.cuda.current_device()))
        with _prepare_mode():
            run(**tensors, config=dict(config or {}))
    except Exception as exc:  # noqa: BLE001 -- the launch raises its own error if this one was real
        STATS["errors"] += 1
        LAST_ERROR[:] = [f"{getattr(run, '__module__', '?')} {dict(params)}: {type(exc).__name__}: {exc}"]
        return
    STATS["prepared"] += 1


def preparer(run: Callable[..., Any]) -> Callable[..., None]:
    """A version module's ``prepare``: ``prepare = _cutile_prepare.preparer(run)`` at the end of the module."""

    def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None,
                input_kwargs: Mapping[str, Any] | None = None) -> None:
        """Compile this version's launches for ``params`` without launching anything (outside the GPU lock)."""
        prepare_run(run, params, config, input_kwargs)

    return prepare
