"""The host side every CuTe DSL rmsnorm_fp8 version shares: input checks, compile cache, launch.

A version defines its kernel class (constructed as ``cls(d, threads)``, called as
``(x, w, q, scale pointers, t, eps, stream)``) and gets its ``supports, prepare, run`` from
:func:`version_functions`.  Only ``d`` and the thread count are compile-time; ``t`` and ``eps`` are
runtime arguments, marshalled once per (shape, eps, stream) by a :class:`~.launch.Launcher`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from kforge_kernels.rmsnorm_fp8.contract import GROUP, check
from kforge_kernels._shared import cute_fastcall as fastcall
from kforge_kernels.rmsnorm_fp8.cute.launch import Launcher, compiled, dummy_ptr

_LAUNCHERS: dict[tuple, Any] = {}


def _types() -> list[tuple[Any, int]]:
    import cutlass

    return [(cutlass.BFloat16, 16), (cutlass.BFloat16, 16), (cutlass.Float8E4M3FN, 16), (cutlass.Float32, 4)]


def compiled_for(tag: str, cls: Any, d: int, threads: int) -> Any:
    """The compiled kernel of ``cls`` for width ``d`` (once per process and arch)."""

    def build() -> Any:
        import cuda.bindings.driver as cuda
        import cutlass
        import cutlass.cute as cute

        ptrs = [dummy_ptr(dt, al) for dt, al in _types()]
        return cute.compile(cls(d, threads), *ptrs, cutlass.Int32(1), cutlass.Float32(1e-6), cuda.CUstream(0),
                            options=os.environ.get("KFORGE_CUTE_OPTIONS", ""))

    return compiled((tag, d, threads, os.environ.get("CUTE_DSL_ARCH", "")), build)


def version_functions(tag: str, kernel_cls: Callable[[], Any], config: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """``supports, prepare, run`` of a CuTe version whose kernel class ``kernel_cls()`` returns."""

    cfg_default = int(config["threads"])

    def supports(params: Mapping[str, int]) -> str | None:
        if int(params["d"]) % GROUP:
            return f"d={params['d']} is no multiple of the {GROUP}-wide quantisation group"
        return None

    def prepare(params: Mapping[str, int], cfg: Mapping[str, Any] | None = None) -> None:
        c = {**config, **(cfg or {})}
        compiled_for(tag, kernel_cls(), int(params["d"]), int(c["threads"]))

    def run(x: Any, weight: Any, eps: float, *, q: Any, scale: Any, config: Mapping[str, Any] | None = None):
        try:
            import cutlass
        except ImportError:
            raise RuntimeError("the CuTe DSL is not installed; pip install 'nvidia-cutlass-dsl[cu13]==4.8.1' "
                               "(the gpu extra)") from None
        import torch

        threads = int((config or {}).get("threads", cfg_default))
        t, d = check(x, weight, q, scale)
        stream = fastcall.current_stream(x.device.index or 0)
        key = (tag, t, d, threads, float(eps), stream, x.device.index)
        launch = _LAUNCHERS.get(key)
        if launch is None:
            fn = compiled_for(tag, kernel_cls(), d, threads)
            launch = _LAUNCHERS[key] = Launcher(fn, _types(), [cutlass.Int32(t), cutlass.Float32(float(eps))],
                                                stream, x.device.index or 0)
        launch((x.data_ptr(), weight.data_ptr(), q.data_ptr(), scale.data_ptr()))
        return q, scale

    return supports, prepare, run
