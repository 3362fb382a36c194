"""Compile a cuTile version's launches ahead of time, for its ``prepare``: outside the shared GPU's lock.

When xdist workers share one GPU each GPU section holds a file lock (:mod:`pytest_kforge.gpushare`), and a
cuTile kernel compiles at its first ``ct.launch`` of a new shape -- inside that lock, so every worker's compiles
would run one at a time.  A version's ``prepare(params, config)`` calls its own ``run`` once on uninitialised
tensors of the shapes the harness will pass, under :func:`prepare_mode`; the version's launch helper then calls
:func:`compile_launch` instead of ``ct.launch`` (or uses :func:`launch`, which does both).

:func:`compile_launch` goes through cuTile's own launch preparation without the launch
(``cuda.tile._cext._export_ipc_benchmark_payload``, cuda-tile 1.7: it reads the arguments as ``ct.launch`` does,
compiles on a miss into the dispatcher's in-process cache and returns an IPC payload, which is dropped; nothing
is queued), so the real launch that follows finds the kernel compiled.  A prepare that fails is counted and left
to the launch, which raises its own error if the failure was real: prepare can cost time, never correctness.
The MLA cuTile versions' preparer (``kernels/mla/cutile/prepare.py``) is built on this module; so is
``kernels/rmsnorm_fp8``'s.  Import it as ``kforge_kernels._shared.cutile_prepare`` (versions may not import
the harness).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, MutableMapping, MutableSequence
from typing import Any

__all__ = ["preparing", "prepare_mode", "compile_launch", "launch", "prepare_run", "preparer", "STATS", "LAST_ERROR"]

_PREPARING: contextvars.ContextVar[bool] = contextvars.ContextVar("kforge_cutile_preparing", default=False)
#: this process's counts: prepared shapes, launches compiled by prepare, prepares that failed
STATS: dict[str, int] = {"prepared": 0, "compiled": 0, "errors": 0}
#: the last prepare failure, ``"<version run> <params>: <error>"`` (the launch reports its own)
LAST_ERROR: list[str] = []
_DONE: set[tuple[Any, ...]] = set()


def preparing() -> bool:
    """True inside :func:`prepare_mode`: launches compile and return, tensors stay uninitialised."""
    return _PREPARING.get()


@contextlib.contextmanager
def prepare_mode() -> Iterator[None]:
    token = _PREPARING.set(True)
    try:
        yield
    finally:
        _PREPARING.reset(token)


def compile_launch(grid: tuple[int, ...], kernel: Any, args: tuple[Any, ...],
                   stats: MutableMapping[str, int] | None = None) -> None:
    """Compile ``kernel`` for ``args`` as ``ct.launch(stream, grid, kernel, args)`` would, without launching it."""
    import torch
    from cuda.tile import _cext

    export = getattr(_cext, "_export_ipc_benchmark_payload", None)
    if export is None:
        raise RuntimeError("this cuda-tile has no _export_ipc_benchmark_payload (cuda-tile 1.7 has): the kernels "
                           "compile at their first launch, inside the GPU lock")
    export(torch.cuda.current_stream(), tuple(grid), kernel, tuple(args))  # the stream ct.launch gets
    (STATS if stats is None else stats)["compiled"] += 1


def launch(grid: tuple[int, ...], kernel: Any, args: tuple[Any, ...]) -> None:
    """``ct.launch`` on torch's current stream (the harness's CUDA events time that stream); in prepare mode the
    kernel is compiled for ``args`` and not launched."""
    if preparing():
        compile_launch(grid, kernel, args)
        return
    try:
        import cuda.tile as ct
    except ImportError:
        raise RuntimeError("cuda.tile is not installed; install the gpu extra (pip install 'cuda-tile[tileiras]')") from None
    import torch

    ct.launch(torch.cuda.current_stream(), grid, kernel, args)


def prepare_run(run: Callable[..., Any], key: tuple[Any, ...], tensors: Callable[[Any], Mapping[str, Any]],
                config: Mapping[str, Any] | None, *, what: str = "",
                stats: MutableMapping[str, int] | None = None, done: set[tuple[Any, ...]] | None = None,
                last_error: MutableSequence[str] | None = None) -> None:
    """Call ``run(**tensors(device), config=...)`` once in prepare mode (skipped when this process already did for
    ``key``, or without CUDA).  ``tensors`` builds uninitialised inputs and outputs on the given device;
    ``stats`` / ``done`` / ``last_error`` default to this module's."""
    import torch

    stats = STATS if stats is None else stats
    done = _DONE if done is None else done
    last_error = LAST_ERROR if last_error is None else last_error
    key = (id(run), *key, repr(sorted((config or {}).items())))
    if key in done or not torch.cuda.is_available():
        return
    done.add(key)
    try:
        made = tensors(torch.device("cuda", torch.cuda.current_device()))
        with prepare_mode():
            run(**made, config=dict(config or {}))
    except Exception as exc:  # noqa: BLE001 -- the launch raises its own error if this one was real
        stats["errors"] += 1
        last_error[:] = [f"{getattr(run, '__module__', '?')} {what}: {type(exc).__name__}: {exc}"]
        return
    stats["prepared"] += 1


def preparer(run: Callable[..., Any], empty: Callable[[Mapping[str, int], Any], Mapping[str, Any]]) -> Callable[..., None]:
    """A cuTile version module's ``prepare``: ``prepare = preparer(run, empty)``, ``empty(params, device)`` giving
    uninitialised inputs and outputs with the shapes and dtypes the spec makes for ``params``."""

    def prepare(params: Mapping[str, int], config: Mapping[str, Any] | None = None) -> None:
        """Compile this version's launches for ``params`` without launching anything (outside the GPU lock)."""
        prepare_run(run, (tuple(sorted(params.items())),), lambda device: empty(params, device), config,
                    what=str(dict(params)))

    return prepare
