"""The CuTe MLA call plan (``_cute_plan``) without a GPU: compiled kernels replaced by recorders.

Each case pins which kernels one call launches and what each receives (argument by argument, the
values the C side would read), so the plan reproduces the launch sequences of the per-call host
code it replaced (issue 39), and a second call of the shape only rewrites addresses.
"""

from __future__ import annotations

import importlib
import math
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_kforge.registry import load_version

KDIR = Path(__file__).resolve().parents[1] / "kernels"
pytest.importorskip("cutlass", reason="CuTe DSL (nvidia-cutlass-dsl) is not installed")
torch = pytest.importorskip("torch")


def _mods() -> tuple[Any, Any]:
    load_version("mla", "v0", kernels_dir=KDIR)  # makes kforge_kernels.mla importable
    return (importlib.import_module("kforge_kernels.mla.cute.host"),
            importlib.import_module("kforge_kernels.mla.cute.plan"))


class _Exec:
    def __init__(self, fn: _Fn) -> None:
        self.fn = fn

    def generate_execution_args(self, *args: Any) -> tuple[list[Any], list[Any]]:
        return list(args), []

    def run_compiled_program(self, exe_args: list[Any]) -> None:
        self.fn.log.append((self.fn.name, [_value(a) for a in exe_args]))


class _Fn:
    """A compiled function that records what each launch would read."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def to(self, device_index: int) -> _Exec:
        return _Exec(self)


def _value(arg: Any) -> Any:
    desc = getattr(arg, "_desc", None)
    if desc is not None:
        return ("ptr", desc.value)
    value = getattr(arg, "value", None)
    return round(value, 4) if isinstance(value, float) else (value if value is not None else int(arg))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, list]:
    host, plan = _mods()
    log: list = []
    fns: dict = {}

    def compiled(kind: str, s: int, h: int, stages: int, direct: bool = False, paired: bool = False) -> tuple:
        rows = 64 * -(-(s * h) // 64)
        key = (kind, direct, paired)
        if key not in fns:
            tag = f"{kind}{'/direct' if direct else ''}{'/paired' if paired else ''}"
            fns[key] = (_Fn(tag, log), _Fn(f"combine:{kind}", log))
        return (*fns[key], rows, rows // 64)

    monkeypatch.setattr(host, "compiled", compiled)
    monkeypatch.setattr(plan, "PLANS", type(plan.PLANS)())
    monkeypatch.setattr(plan, "_WARM", {})
    monkeypatch.setattr(plan.fastcall, "EXECUTORS", {})
    monkeypatch.setattr(host, "_REDO_FLAGS", {})
    monkeypatch.setattr(host, "_TAIL", {})
    return host, plan, log


ADDR = {"q": 0x10000, "kv": 0x20000, "bt": 0x30000, "lens": 0x40000, "o": 0x50000, "l": 0x60000}
CPU = torch.device("cpu")


def _key(kind: str, b: int, s: int, h: int, pages: int, allow_direct: bool = True) -> tuple:
    return (kind, b, s, h, pages, 2, 0, 132, 3.0, 16, allow_direct, False, None)


def _call(plan_mod: Any, key: tuple, addrs: dict = ADDR, stream: int = 7, scale: float = 0.5) -> Any:
    p = plan_mod.plan_for(key, CPU, stream)
    p(addrs, stream, scale, 999)
    return p


def _p(name: str, addrs: dict = ADDR) -> tuple:
    return ("ptr", addrs[name])


def test_decode_of_v59_is_one_merged_pair_launch_of_the_exact_kernel(fake) -> None:
    """b32 s1 h128 t4096: 2 splits merged in a cluster pair leave one result, written directly by v35_cute's kernel."""
    host, plan_mod, log = fake
    p = _call(plan_mod, _key("sm90_seesaw_pair_stale_onesplit", 32, 1, 128, 64))
    assert (p.path, p.splits, p.slots, p.paired, p.kind) == ("direct", 2, 1, True, "sm90_seesaw_pair_c3early")
    scale = round(0.5 * host.LOG2_E, 4)
    ins = [_p("q"), _p("kv"), _p("bt"), _p("lens")]
    assert log == [("sm90_seesaw_pair_c3early/direct/paired",
                    [*ins, _p("o"), _p("l"), _p("o"), _p("l"), _p("lens"), 32, 999, 64, 2, scale, 7])]


def test_spec_of_v59_runs_the_stale_kernel_then_its_redo_over_zeroed_flags(fake) -> None:
    host, plan_mod, log = fake
    p = _call(plan_mod, _key("sm90_seesaw_pair_stale_onesplit", 32, 16, 128, 64))
    assert (p.path, p.splits, p.slots, p.paired) == ("direct", 1, 1, False)
    flags = p.flags
    assert flags is not None and flags.numel() >= 32 * 32 and int(flags.abs().sum()) == 0
    assert host.redo_flag_tensors() == [flags]
    (k1, a1), (k2, a2) = log
    assert k1 == "sm90_seesaw_pair_stale_redo/direct" and k2 == "sm90_seesaw_pair_persist_redo/direct"
    assert a1 == a2 and a1[8] == ("ptr", flags.data_ptr()) and a1[9:13] == [32, 999, 64, 1]


def test_split_path_launches_main_then_combine_on_plan_owned_partials(fake) -> None:
    """v1_cute's sm80 kernel, no direct epilogue: the partials are the plan's, the same on every call."""
    _host, plan_mod, log = fake
    key = _key("sm80", 4, 1, 16, 8, allow_direct=False)
    p = _call(plan_mod, key)
    assert p.path == "split" and p.parts is not None
    opart, lpart = p.parts
    parts = [("ptr", opart.data_ptr()), ("ptr", lpart.data_ptr())]
    (k1, a1), (k2, a2) = log
    assert k1 == "sm80" and a1[4:6] == parts and a1[6:8] == [4, 999]
    assert k2 == "combine:sm80" and a2 == [*parts, _p("o"), _p("l"), 4, p.slots, 7]
    log.clear()
    other = {k: v + 0x1000 for k, v in ADDR.items()}
    assert _call(plan_mod, key, other) is p and len(p.bindings) == 1  # same plan, same binding, new addresses
    assert log[0][1][:4] == [_p("q", other), _p("kv", other), _p("bt", other), _p("lens", other)]
    assert log[0][1][4:6] == parts and log[1][1][2:4] == [_p("o", other), _p("l", other)]


def test_unchanged_addresses_are_not_rewritten_and_an_edited_dict_is(fake) -> None:
    """A serving loop passes the same buffers: the binding skips the writes; an address that changed is written,
    also when the caller edited the dict it passed before."""
    _host, plan_mod, log = fake
    key = _key("sm80", 4, 1, 16, 8, allow_direct=False)
    addrs = dict(ADDR)
    p = _call(plan_mod, key, addrs)
    binding = next(iter(p.bindings.values()))
    sets: list = []
    real_set = binding.set
    binding.set = lambda a: sets.append(a) or real_set(a)  # type: ignore[method-assign]
    log.clear()
    _call(plan_mod, key, dict(ADDR))
    assert sets == [] and log[0][1][:4] == [_p("q"), _p("kv"), _p("bt"), _p("lens")]
    addrs["q"] += 0x100  # edited in place, passed again
    _call(plan_mod, key, addrs)
    assert sets[-1][0] == 0x10100 and log[-2][1][0] == ("ptr", 0x10100)


def test_a_bindings_pointers_share_one_slot_array_the_launches_read(fake) -> None:
    """``cute_fastcall.slotted`` (in Binding): every pointer's C storage is a slot of one array, so new buffers are
    one slice write; the marshalled launches take the slots' addresses (``__c_pointers__``) and read what the write
    put there."""
    import ctypes

    _host, plan_mod, log = fake
    key = _key("sm80", 4, 1, 16, 8, allow_direct=False)
    p = _call(plan_mod, key)
    binding = next(iter(p.bindings.values()))
    slots = binding.slots
    assert slots is not None and not binding.write_pointers
    base, width = ctypes.addressof(slots), ctypes.sizeof(ctypes.c_void_p)
    for i, ptr in enumerate(binding.ptrs.values()):
        assert ptr.__c_pointers__() == [base + i * width] == [ctypes.addressof(ptr._desc)]
    other = {k: v + 0x2000 for k, v in ADDR.items()}
    log.clear()
    _call(plan_mod, key, other)
    assert list(slots)[:6] == [other[n] for n in plan_mod.ADDRESS_NAMES[:6]]
    assert log[0][1][:4] == [_p("q", other), _p("kv", other), _p("bt", other), _p("lens", other)]


class _Recorder:
    """A ``_desc`` stand-in that records the values written to it."""

    def __init__(self, value: int, writes: list) -> None:
        self._value, self._writes = value, writes

    @property
    def value(self) -> int:
        return self._value

    @value.setter
    def value(self, v: int) -> None:
        self._writes.append(v)
        self._value = v


def test_a_cpu_tensor_is_refused_in_one_sentence(fake) -> None:
    host, _plan, _log = fake
    q = torch.zeros(1, 1, 16, 576, dtype=torch.bfloat16)
    kv = torch.zeros(2, 64, 576, dtype=torch.bfloat16)
    bt, lens = torch.zeros(1, 2, dtype=torch.int32), torch.ones(1, dtype=torch.int32)
    out, lse = torch.empty(1, 1, 16, 512, dtype=torch.bfloat16), torch.empty(1, 16, 1)
    with pytest.raises(ValueError, match=r"must be CUDA tensors \(q is on the CPU\); move them to the GPU first"):
        host.run_split_combine(q, kv, bt, lens, 0.1, out, lse, {}, "sm80")


def test_fused_kind_zeroes_its_counters_before_every_call(fake) -> None:
    _host, plan_mod, log = fake
    key = _key("sm90_seesaw_fused", 4, 1, 16, 8, allow_direct=False)
    p = _call(plan_mod, key)
    assert p.sem is not None and len(log) == 1 and log[0][1][8] == ("ptr", p.sem.data_ptr())
    p.sem.fill_(5)
    _call(plan_mod, key)
    assert int(p.sem.abs().sum()) == 0


def test_tail_kind_runs_the_direct_grid_then_the_tail_grid_with_shifted_partials(fake) -> None:
    host, plan_mod, log = fake
    p = _call(plan_mod, _key("sm90_seesaw_pair_tail", 32, 16, 128, 64))
    assert p.path == "tail"
    tp, sem, opart, _lpart, b_first = p.tail
    names = [k for k, _ in log]
    assert names == (["sm90_seesaw_pair_tail/direct"] if tp.full else []) + (
        ["sm90_seesaw_pair_tail"] if tp.pieces else [])
    for _, args in log:
        assert args[6:9] == [_p("o"), _p("l"), ("ptr", sem.data_ptr())]
    if tp.pieces:
        rows = 64 * -(-(16 * 128) // 64)
        assert log[-1][1][4] == ("ptr", opart.data_ptr() - b_first * host.MAX_PARTS * rows * host.D_V * 4)
        assert log[-1][1][12] == len(tp.pieces)


def test_a_new_stream_or_scale_gets_its_own_binding_and_a_new_stream_its_own_plan(fake) -> None:
    _host, plan_mod, log = fake
    key = _key("sm80", 4, 1, 16, 8, allow_direct=False)
    p = _call(plan_mod, key)
    assert _call(plan_mod, key, scale=0.25) is p and len(p.bindings) == 2
    q = _call(plan_mod, key, stream=9)
    assert q is not p and log[-1][1][-1] == 9


def test_the_cache_drops_the_oldest_plan_but_never_one_a_capture_used(fake, monkeypatch) -> None:
    _host, plan_mod, _log = fake
    monkeypatch.setattr(plan_mod, "MAX_PLANS", 2)
    keys = [_key("sm80", b, 1, 16, 8, allow_direct=False) for b in (1, 2, 3)]
    first = _call(plan_mod, keys[0])
    first.captured = True
    for k in keys[1:]:
        _call(plan_mod, k)
    assert first in plan_mod.PLANS.values() and len(plan_mod.PLANS) == 2
    assert plan_mod.PLANS.get((*keys[1], 7)) is None and keys[1] not in plan_mod._WARM


def test_capturing_a_shape_never_called_is_refused_with_what_to_do(fake, monkeypatch) -> None:
    _host, plan_mod, _log = fake
    monkeypatch.setattr(plan_mod, "_capturing", lambda: True)
    with pytest.raises(RuntimeError, match="call the version once outside the CUDA graph capture"):
        plan_mod.plan_for(_key("sm80", 4, 1, 16, 8), CPU, 3)
    monkeypatch.setattr(plan_mod, "_capturing", lambda: False)
    warm = plan_mod.plan_for(_key("sm80", 4, 1, 16, 8), CPU, 3)
    monkeypatch.setattr(plan_mod, "_capturing", lambda: True)
    assert plan_mod.plan_for(_key("sm80", 4, 1, 16, 8), CPU, 11) is warm and warm.captured


def test_a_versions_run_keeps_its_config_memo_and_follows_an_edit_in_place(fake, monkeypatch) -> None:
    """A version's ``run`` resolves its config once per mapping: the same view again costs a compare, an edit in
    place of the view's mapping (or of the defaults, when the view lacks one of their keys) is seen next call."""
    host, _plan, _log = fake
    keys: list = []
    monkeypatch.setattr(host, "launch_split_combine", lambda *a: keys.append(a[8]))
    made: list = []
    real = host._version_config
    monkeypatch.setattr(host, "_version_config", lambda *a: made.append(a) or real(*a))
    cfg = dict(host.SEESAW_CONFIG)
    _s, _p, run = host.version_functions("vX_cute", "sm80", cfg)
    mine = dict(cfg)
    view = types.MappingProxyType(mine)  # what Version passes: a read-only view of its own copy
    for _ in range(3):
        run(None, None, None, None, 0.1, out=None, lse=None, config=view)
    assert len(made) == 1 and keys == [host.config_key(cfg)] * 3 and keys[1] is keys[0]  # the memo's tuple
    cfg["num_splits"] = 4  # an edit of the defaults: the view holds every key, so it decides and nothing is redone
    run(None, None, None, None, 0.1, out=None, lse=None, config=view)
    assert len(made) == 1 and keys[-1] == keys[0]
    mine["num_splits"] = 4  # an edit of the view's mapping in place
    run(None, None, None, None, 0.1, out=None, lse=None, config=view)
    assert len(made) == 2 and keys[-1] == host.config_key(mine) != keys[0]
    del mine["sm_count"]  # now the defaults fill a key: their edits count
    run(None, None, None, None, 0.1, out=None, lse=None, config=view)
    cfg["sm_count"] = 66
    run(None, None, None, None, 0.1, out=None, lse=None, config=view)
    assert len(made) == 4 and keys[-1][2] == 66
    run(None, None, None, None, 0.1, out=None, lse=None)  # no config: the defaults alone
    assert keys[-1] == host.config_key(cfg)
    with pytest.raises(ValueError, match="supports stages=2 only"):
        run(None, None, None, None, 0.1, out=None, lse=None, config=types.MappingProxyType({**mine, "stages": 3}))
    _s, _p, redo = host.version_functions("vY_cute", "sm90_seesaw_pair_persist_redo", cfg)
    with pytest.raises(ValueError, match="only runs behind its stale-max kind"):
        redo(None, None, None, None, 0.1, out=None, lse=None)


def test_run_version_is_the_closure_run_made_once(fake, monkeypatch) -> None:
    """The early versions' one-call ``run_version`` (v4_cute, v6_cute) runs :func:`version_functions`' ``run``,
    made once per (name, kind, defaults) and kept: its config memo lives across calls, and a stages edit is refused
    alike."""
    host, _plan, _log = fake
    keys: list = []
    monkeypatch.setattr(host, "launch_split_combine", lambda *a: keys.append(a[8]))
    monkeypatch.setattr(host, "_RUNS", {})
    cfg = dict(host.SEESAW_CONFIG)
    for _ in range(3):
        host.run_version("vZ_cute", "sm80", cfg, None, None, None, None, 0.1, None, None, None)
    assert len(host._RUNS) == 1 and keys == [host.config_key(cfg)] * 3 and keys[2] is keys[0]
    with pytest.raises(ValueError, match="vZ_cute supports stages=2 only"):
        host.run_version("vZ_cute", "sm80", cfg, None, None, None, None, 0.1, None, None, {"stages": 3})


@pytest.mark.parametrize("api", ["public", "export"])
def test_the_host_path_tool_runs_on_a_cpu(api: str) -> None:
    """kernels/mla/tools/host_path.py (the devlog's host-time table) keeps working: a short run prints its line."""
    import subprocess
    import sys

    tool = KDIR / "mla" / "tools" / "host_path.py"
    ran = subprocess.run([sys.executable, str(tool), "--calls", "20", "--api", api], capture_output=True, text=True,
                         timeout=300, cwd=KDIR.parent)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"v59_cute decode ({api} API): " in ran.stdout and "us min" in ran.stdout


def test_the_split_cap_binds_only_on_tiny_grids_and_no_split_is_left_without_pages() -> None:
    host, _plan = _mods()
    base, wide = {"num_splits": 0, "sm_count": 132}, {"num_splits": 0, "sm_count": 132, "max_splits": 64}
    # (row blocks x batch, pages): decode, spec, serve_b1
    assert [host.choose_splits(w, p, base) for w, p in ((64, 64), (1024, 64), (2, 128))] == [2, 1, 13]
    assert [host.choose_splits(w, p, wide) for w, p in ((64, 64), (1024, 64), (2, 128))] == [2, 1, 43]
    for w, p in ((2, 128), (3, 100), (5, 37), (7, 128), (1, 1)):
        sp = host.choose_splits(w, p, wide)
        assert math.ceil(p / math.ceil(p / sp)) == sp  # a raised cap leaves no split without pages
    assert host.choose_splits(3, 100, base) == 14  # the default cap keeps the measured versions' plans (7 pages x 14)
    assert host.config_key(wide)[-1] == 64 and host.config_key(base)[-1] == host.DEFAULT_MAX_SPLITS
