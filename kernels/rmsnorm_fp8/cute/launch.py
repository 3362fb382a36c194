"""Host glue of the CuTe DSL rmsnorm_fp8 versions: compile once per key, launch with few host cycles.

Calling a ``cute.compile`` result marshals every argument on every call (tens of microseconds, more
than the decode trial's kernel).  A :class:`Launcher` marshals one shape's arguments once
(``generate_execution_args``) and, per call, only rewrites the addresses in the pointers' C storage
before ``run_compiled_program`` -- the library's own launch on the caller's stream, so a CUDA
graph captures it.  The same technique as the MLA plan (``kernels/mla/cute/plan.py``, run 28),
kept here so this kernel does not import another kernel's library.  A DSL whose pointer internals
differ falls back to the library call (the same result, slower); ``FALLBACKS`` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kforge_kernels._shared import cute_fastcall as fastcall

__all__ = ["Launcher", "FALLBACKS", "compiled", "dummy_ptr"]

_COMPILED: dict[tuple, Any] = {}
FALLBACKS: list[str] = []


def dummy_ptr(dtype: Any, align: int = 16) -> Any:
    """A pointer of ``dtype`` at an aligned dummy address (compilation reads only type and alignment)."""
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    return make_ptr(dtype, 1 << 20, cute.AddressSpace.gmem, assumed_align=align)


def compiled(key: tuple, build: Callable[[], Any]) -> Any:
    """``build()`` (a ``cute.compile`` call) once per ``key`` for the life of the process."""
    hit = _COMPILED.get(key)
    if hit is None:
        hit = _COMPILED[key] = build()
    return hit


class Launcher:
    """One compiled kernel with its arguments marshalled once: ``n_ptrs`` leading pointers, then ``scalars``.

    ``launcher(addrs)`` writes the ``n_ptrs`` addresses and launches.  One launcher per
    (compiled function, scalars, stream, device): the caller keys them.
    """

    def __init__(self, fn: Any, ptr_types: Sequence[tuple[Any, int]], scalars: Sequence[Any], stream: int,
                 device_index: int) -> None:
        import cuda.bindings.driver as cuda

        self.fn = fn
        self.ptr_types = list(ptr_types)
        self.ptrs = [dummy_ptr(dt, al) for dt, al in self.ptr_types]
        self.scalars = list(scalars)
        self.stream = cuda.CUstream(stream)
        self._marshalled: fastcall.Marshalled | None = None
        if all(fastcall.rewritable(p) for p in self.ptrs):
            m = fastcall.Marshalled(fn, (*self.ptrs, *self.scalars, self.stream), device_index, FALLBACKS)
            self._marshalled = m if m.marshalled else None
        else:
            FALLBACKS.append("make_ptr has no rewritable _desc: each call marshals its arguments again")

    def __call__(self, addrs: Sequence[int]) -> None:
        if self._marshalled is not None:
            for p, a in zip(self.ptrs, addrs):
                p._desc.value = a
                p._pointer = a
            self._marshalled()
            return
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_ptr

        ptrs = [make_ptr(dt, a, cute.AddressSpace.gmem, assumed_align=al) for (dt, al), a in zip(self.ptr_types, addrs)]
        self.fn(*ptrs, *self.scalars, self.stream)
