"""kernels/_shared/cute_fastcall.py on CPU, against a fake executor shaped like nvidia-cutlass-dsl 4.8.1's
(``_get_invoke_packed_args`` refills one thread-local array; ``capi_func`` reads it; ``cuda_result`` holds the
code).  The GPU side (the same kernels' outputs and the host time with and without it) is measured on the device."""

from __future__ import annotations

import ctypes
import importlib
from pathlib import Path

import pytest

from pytest_kforge.registry import Registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fastcall():
    Registry(ROOT / "kernels").kernel("rmsnorm_fp8")  # installs the kforge_kernels package
    return importlib.import_module("kforge_kernels._shared.cute_fastcall")


class FakeExecutor:
    """Packs like JitExecutor: base args, then the CUDA-result slot; one shared buffer per thread."""

    def __init__(self) -> None:
        self.cuda_result = ctypes.c_int32(0)
        self._shared = None
        self.calls: list[list[int | None]] = []

    def _get_invoke_packed_args(self, exe_args):
        if self._shared is None:
            self._shared = (ctypes.c_void_p * (len(exe_args) + 1))()
            self._shared[len(exe_args)] = ctypes.addressof(self.cuda_result)
        for i, a in enumerate(exe_args):
            self._shared[i] = a
        return self._shared

    def capi_func(self, packed) -> None:
        self.calls.append([packed[i] for i in range(len(packed))])


def test_the_packed_array_is_built_once_and_survives_the_executors_next_launch(fastcall) -> None:
    ex = FakeExecutor()
    a = fastcall.packed_call(ex, [0x1000, 0x2000])
    b = fastcall.packed_call(ex, [0x3000, 0x4000])  # refills the executor's shared buffer
    a()
    b()
    slot = ctypes.addressof(ex.cuda_result)
    assert ex.calls == [[0x1000, 0x2000, slot], [0x3000, 0x4000, slot]]


def test_a_cuda_error_is_raised_and_a_foreign_executor_falls_back(fastcall) -> None:
    ex = FakeExecutor()
    call = fastcall.packed_call(ex, [0x1000])
    ex.cuda_result.value = 700
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        call()
    assert fastcall.packed_call(object(), [0x1000]) is None  # no internals: the caller keeps run_compiled_program


def test_it_is_on_unless_turned_off(fastcall, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KFORGE_CUTE_FASTCALL", raising=False)
    fastcall.enabled.cache_clear()
    assert fastcall.enabled()
    monkeypatch.setenv("KFORGE_CUTE_FASTCALL", "0")
    assert fastcall.enabled()  # read once per process
    fastcall.enabled.cache_clear()
    assert not fastcall.enabled()
    monkeypatch.delenv("KFORGE_CUTE_FASTCALL")
    fastcall.enabled.cache_clear()


def test_the_installed_dsl_has_the_internals_it_reads() -> None:
    """The pin (nvidia-cutlass-dsl 4.8.1) keeps them; a DSL without them falls back (previous test)."""
    jit = pytest.importorskip("cutlass.base_dsl.jit_executor", reason="the CuTe DSL is not installed here")
    assert callable(getattr(jit.JitExecutor, "_get_invoke_packed_args", None))
    assert callable(getattr(jit.JitExecutor, "run_compiled_program", None))


def test_run_compiled_program_is_pack_then_capi_then_the_result_code() -> None:
    """The packed call's equivalence argument, checked against the installed DSL's source: the library's launch
    packs ``exe_args`` (constant per launcher: the addresses of argument storage rewritten in place), calls
    ``capi_func`` on the array and reads ``cuda_result``; nothing else runs per call that the packed call skips.  A
    DSL whose launch does more fails here, before a GPU run trusts the shortcut."""
    import inspect
    import re

    jit = pytest.importorskip("cutlass.base_dsl.jit_executor", reason="the CuTe DSL is not installed here")
    src = inspect.getsource(jit.JitExecutor.run_compiled_program)
    body = [ln.strip() for ln in src.splitlines()[1:] if ln.strip() and not ln.strip().startswith("#")]
    calls = [c for ln in body for c in re.findall(r"self\.(\w+)\(", ln)]
    assert calls == ["_get_invoke_packed_args_func", "capi_func"], body
    assert any("self.cuda_result.value" in ln for ln in body)
    pack = inspect.getsource(jit.JitExecutor._get_invoke_packed_args)
    # the array holds exe_args as given (c_void_p or ints), then the result slot and the kernel pointers
    assert "packed_args[i] = (" in pack and "self._cuda_result_addr" in pack and "self._kernel_ptrs" in pack
