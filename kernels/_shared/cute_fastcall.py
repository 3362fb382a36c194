"""One CuTe DSL launch with its packed argument array built once: per call, one ctypes call and an error check.

A compiled CuTe DSL function's executor (``fn.to(device)``, nvidia-cutlass-dsl 4.8.1) launches through
``run_compiled_program(exe_args)``: per call it refills a thread-local ``c_void_p`` array from ``exe_args`` (the
addresses of each argument's C storage, plus the executor's CUDA-result slot and kernel pointers), calls
``capi_func(array)`` -- the compiled host code, which ends in ``cudaLaunchKernelExC`` on the stream marshalled into
the arguments -- and reads the result code.  The addresses never change for marshalled arguments whose storage is
rewritten in place (the pre-marshalled launchers write new tensor addresses into the pointers' ``_desc``), so the
array can be built once: :class:`PackedCall` copies the executor's own array for those ``exe_args`` and a call is
``capi_func(array)`` alone.  The launch is the same one (same host code, same stream), so a CUDA graph captures it
as before.  Measured on the H200 (2026-12-07, ``benchmarks.public_call``, MLA v59_cute): host time per public call
19.2 -> 13.2 us on decode, 31.0 -> 21.3 us on spec (two launches), device time unchanged, the outputs bit for bit
those of ``run_compiled_program``, CUDA-graph capture and replay correct (docs/kernels/mla.md).

It reads executor internals (``_get_invoke_packed_args``, ``capi_func``, ``cuda_result``): :func:`packed_call`
returns None when they are not there, and the caller keeps ``run_compiled_program``.  On by default since that
measurement; ``KFORGE_CUTE_FASTCALL=0`` turns it off (and :func:`current_stream` back to ``torch.cuda.current_stream``).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["PackedCall", "packed_call", "enabled", "current_stream", "stream_getter", "Marshalled", "executor",
           "rewritable", "slotted", "EXECUTORS"]

#: one executor per (compiled function, device), made outside any capture (each holds the loaded module)
EXECUTORS: dict[tuple[int, int], tuple[Any, Any]] = {}


@functools.cache
def enabled() -> bool:
    """The packed call and raw stream getter are on unless ``KFORGE_CUTE_FASTCALL=0``.  Read once per process (an
    environment lookup costs ~1 us, a call's whole budget is 10); ``enabled.cache_clear()`` (and
    ``stream_getter.cache_clear()``) re-read it."""
    return os.environ.get("KFORGE_CUTE_FASTCALL", "1") != "0"


@functools.cache
def stream_getter() -> Callable[[int], int]:
    """:func:`current_stream`'s function, resolved once (a hot path calls ``stream_getter()(index)``)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None and enabled():
        return raw  # type: ignore[no-any-return]
    return lambda index: int(torch.cuda.current_stream(index).cuda_stream)


def current_stream(index: int) -> int:
    """The caller's current CUDA stream on device ``index`` as an int: torch's raw getter (what Inductor's generated
    code calls, ~0.2 us; inside a CUDA graph capture it is the capture stream), or with ``KFORGE_CUTE_FASTCALL=0``
    ``torch.cuda.current_stream`` (~2.8 us: it builds a ``torch.cuda.Stream`` object per call)."""
    return stream_getter()(index)


class PackedCall:
    """``capi_func(array)`` with ``array`` fixed; raises when the launch reports a CUDA error."""

    def __init__(self, capi: Any, array: Any, result: Any) -> None:
        self._capi, self._array, self._result = capi, array, result

    def __call__(self) -> None:
        self._capi(self._array)
        if self._result is not None and self._result.value != 0:
            raise RuntimeError(f"the CuTe DSL kernel launch failed with CUDA error {self._result.value}")


def packed_call(executor: Any, exe_args: Sequence[Any]) -> PackedCall | None:
    """A :class:`PackedCall` of ``executor`` for ``exe_args`` (from its ``generate_execution_args``), or None when the
    executor lacks the internals it reads (another DSL version: keep ``run_compiled_program``)."""
    pack = getattr(executor, "_get_invoke_packed_args", None)
    capi = getattr(executor, "capi_func", None)
    if pack is None or capi is None or not hasattr(executor, "cuda_result"):
        return None
    shared = pack(list(exe_args))  # the executor's thread-local array, refilled by its next launch: copy it
    array = (ctypes.c_void_p * len(shared))(*shared)
    return PackedCall(capi, array, executor.cuda_result)


def executor(fn: Any, device_index: int) -> Any:
    """``fn.to(device_index)`` once per (compiled function, device) for the life of the process."""
    hit = EXECUTORS.get((id(fn), device_index))
    if hit is None:  # the entry keeps fn alive, so its id is not reused
        hit = EXECUTORS[(id(fn), device_index)] = (fn, fn.to(device_index))
    return hit[1]


def rewritable(p: Any) -> bool:
    """Whether ``p`` (a ``make_ptr`` result) keeps its address in C storage the launch reads (``_desc``)."""
    desc = getattr(p, "_desc", None)
    return desc is not None and hasattr(desc, "value") and getattr(p, "__c_pointers__", None) is not None


def slotted(ptrs: Sequence[Any]) -> Any:
    """Move each ``make_ptr`` result's C storage (``_desc``, whose address a marshalled launch reads) into one ctypes
    array, in the order given, and return the array; None when a pointer lacks the internals this rewires
    (``_c_pointers_cache``, what ``__c_pointers__`` returns).  Call it before the launches are marshalled.

    A call with new buffers then writes its addresses with one slice assignment (``array[:n] = addrs``, ~0.2 us)
    instead of two attribute writes per pointer (~1.5 us for seven; stop 51's sandbox figure, run 33's new-buffer
    public call against its same-buffer one).
    """
    if not all(isinstance(getattr(p, "_c_pointers_cache", None), list) for p in ptrs):
        return None
    slots = (ctypes.c_void_p * len(ptrs))()
    width = ctypes.sizeof(ctypes.c_void_p)
    for i, p in enumerate(ptrs):
        slot = ctypes.c_void_p.from_buffer(slots, i * width)  # keeps ``slots`` alive
        slot.value = p._desc.value
        p._desc = slot
        p._c_pointer = ctypes.addressof(slot)
        p._c_pointers_cache = [p._c_pointer]
    return slots


class Marshalled:
    """``fn(*args)`` with ``args`` marshalled once by the executor (packed with :func:`enabled`); when the executor
    lacks those internals, the library call ``fn(*args)`` and a line in ``fallbacks`` saying why."""

    def __init__(self, fn: Any, args: Sequence[Any], device_index: int, fallbacks: list[str]) -> None:
        self.fn, self.args = fn, tuple(args)
        self._run: Any = None
        self._exe_args: Any = None
        self._packed: PackedCall | None = None
        try:
            ex = executor(fn, device_index)
            self._exe_args, self._adapted = ex.generate_execution_args(*self.args)
            self._run = ex.run_compiled_program
            if enabled():  # KFORGE_CUTE_FASTCALL=0 keeps run_compiled_program (see the module docstring)
                self._packed = packed_call(ex, self._exe_args)
        except (AttributeError, TypeError) as exc:
            fallbacks.append(f"{type(exc).__name__}: {exc}")
            self._run = self._exe_args = None

    @property
    def marshalled(self) -> bool:
        """False when each call goes through the library (``fn(*args)``, marshalling again)."""
        return self._run is not None

    @property
    def call(self) -> Callable[[], None]:
        """The launch itself: the packed call where there is one, else this object (a hot path calls it)."""
        return self._packed if self._packed is not None else self

    def __call__(self) -> None:
        if self._packed is not None:
            self._packed()
        elif self._run is not None:
            self._run(self._exe_args)
        else:
            self.fn(*self.args)
