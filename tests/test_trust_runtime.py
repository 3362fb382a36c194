"""Run-time guards: reference calls, side streams (fake clock), mutation, identity, floor, re-checks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from pytest_kforge.trust.runtime import (InputSnapshot, ReferenceCalled, check_returned, floor_check,
                                         forbid_reference, measure_side_stream_work, perturb_inputs_,
                                         recheck_in_place)

CHEATS = Path(__file__).resolve().parent / "adversarial" / "kernels" / "cheat"


@pytest.fixture(scope="module", autouse=True)
def _restore_kernel_packages():
    """Loading the cheat kernel re-points the ``kforge_kernels`` package; put the old one back after."""
    saved = {k: m for k, m in sys.modules.items() if k == "kforge_kernels" or k.startswith("kforge_kernels.")}
    yield
    for k in [k for k in sys.modules if k == "kforge_kernels" or k.startswith("kforge_kernels.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def load(name: str):
    """A cheat module imported as kforge_kernels.cheat.<name> (the registry's package layout)."""
    from pytest_kforge.registry import Registry

    return Registry(CHEATS.parent).kernel("cheat").version(name)


@pytest.fixture()
def case():
    v0 = load("v0")
    inputs = v0.spec.make_inputs({"rows": 8, "cols": 32}, seed=1)
    outputs = v0.spec.alloc_outputs({"rows": 8, "cols": 32})
    return v0.spec, inputs, outputs


# ---- reference / torch math -------------------------------------------------------------------
def test_reference_call_is_caught_at_run_time(case):
    spec, inputs, outputs = case
    cheat = load("v4_reference")
    with pytest.raises(ReferenceCalled, match="kernel called the reference"):
        with forbid_reference(spec, version="cheat v4"):
            cheat.fn(**inputs, **outputs)
    spec.reference(inputs)  # restored afterwards


def test_torch_math_and_aliases_are_caught():
    from torch import matmul as mm  # an alias captured before the guard: the dispatch mode still sees it

    a = torch.randn(4, 4)
    for fn in (lambda: mm(a, a), lambda: a @ a, lambda: torch.einsum("ij,jk->ik", a, a), lambda: a.softmax(-1),
               lambda: torch.nn.functional.scaled_dot_product_attention(a[None], a[None], a[None])):
        with pytest.raises(ReferenceCalled):
            with forbid_reference():
                fn()


def test_swallowed_violation_is_still_reported():
    a = torch.randn(4, 4)
    with pytest.raises(ReferenceCalled, match="aten.mm"):
        with forbid_reference() as guard:
            try:
                a @ a
            except Exception:  # noqa: BLE001 - the cheat hides the error and falls back
                pass
    assert guard.violations


def test_honest_calls_pass_under_the_guard(case):
    spec, inputs, outputs = case
    with forbid_reference(spec):
        outputs["y"].copy_(inputs["x"].exp())  # elementwise work and copies are fine
        torch.empty(3).fill_(1)


def test_torch_versions_are_poisoned_under_the_guard(case):
    spec, inputs, outputs = case
    v0 = load("v0")
    with pytest.raises(ReferenceCalled, match="torch version"):
        with forbid_reference(spec, torch_ops=False):
            sys.modules["kforge_kernels.cheat.v0"].run(**inputs, **outputs)
    assert v0.fn(**inputs, **outputs)[0] is outputs["y"]


# ---- side streams with a fake device --------------------------------------------------------------
class FakeDevice:
    """A device timeline driven by a fake clock: the current stream, one side stream, a spin ("hold")."""

    def __init__(self) -> None:
        self.now = 0.0
        self.current_busy_until = 0.0
        self.side_busy_until = 0.0

    def clock(self) -> float:
        return self.now

    def launch(self, seconds: float, side: bool = False, waits: bool = True) -> None:
        """``side`` work that ``waits`` starts after the current stream's queued work (``wait_stream``)."""
        if side:
            after = self.current_busy_until if waits else 0.0
            self.side_busy_until = max(self.side_busy_until, self.now, after) + seconds
        else:
            self.current_busy_until = max(self.current_busy_until, self.now) + seconds
        self.now += 5e-6  # launch overhead on the host

    def hold(self, seconds: float) -> None:
        self.launch(seconds)

    def sync_all(self) -> None:
        self.now = max(self.now, self.current_busy_until, self.side_busy_until) + 3e-6

    def record(self) -> float:
        return max(self.now, self.current_busy_until)

    def wait(self, mark: float) -> None:
        self.now = max(self.now, mark) + 3e-6

    def elapsed_s(self, a: float, b: float) -> float:
        return b - a


class NoHoldDevice(FakeDevice):
    """A timeline without a spin (the minimal :class:`DeviceTimeline` protocol)."""

    hold = None  # type: ignore[assignment]


def _measure(dev: FakeDevice, call) -> object:
    return measure_side_stream_work(call, timeline=dev, clock=dev.clock)


@pytest.mark.parametrize("waits", [True, False], ids=["side-waits-for-current", "side-starts-at-once"])
def test_side_stream_detected_with_fake_clock(waits):
    dev = FakeDevice()
    rep = _measure(dev, lambda: dev.launch(300e-6, side=True, waits=waits))
    assert not rep.ok and "side stream" in rep.message and rep.tail_s > 150e-6


def test_current_stream_work_passes_with_fake_clock():
    dev = FakeDevice()
    rep = _measure(dev, lambda: dev.launch(300e-6))
    assert rep.ok and rep.message == "" and rep.event_s == pytest.approx(300e-6)


def test_small_overlapping_side_work_inside_the_window_passes():
    dev = FakeDevice()

    def call():
        dev.launch(50e-6, side=True)
        dev.launch(400e-6)

    assert _measure(dev, call).ok


def test_slow_first_launch_does_not_hide_side_work():
    """The H200 failure: a first call that spends 10 ms on the host (lazy module loading) made the
    idle device's events span that host time, and the old minimum-tail rule picked that sample."""
    dev = FakeDevice()
    calls = []

    def call():
        if not calls:
            dev.now += 10e-3
        calls.append(1)
        for _ in range(20):
            dev.launch(28e-6, side=True)

    rep = _measure(dev, call)
    assert not rep.ok and rep.event_s < 100e-6 and rep.tail_s > 300e-6


def test_slow_host_launch_is_not_device_time():
    """Without a spin the events of an idle device measure host launch time; the hold keeps it out."""
    dev = FakeDevice()

    def call():
        dev.now += 500e-6  # a Python-heavy launch path
        dev.launch(100e-6)

    rep = _measure(dev, call)
    assert rep.ok and rep.event_s == pytest.approx(100e-6, rel=0.2)


def test_one_jittery_repeat_flips_nothing():
    dev = FakeDevice()
    n = [0]

    def honest():
        n[0] += 1
        dev.launch(300e-6)
        if n[0] == 3:  # the host is descheduled during one of the final synchronises
            dev.side_busy_until = dev.current_busy_until + 2e-3

    assert _measure(dev, honest).ok
    dev = FakeDevice()
    n[0] = 0

    def cheat():
        n[0] += 1
        dev.launch(300e-6, side=True)
        if n[0] == 3:
            dev.now += 5e-3  # one slow host call lets the side work finish unseen

    assert not _measure(dev, cheat).ok


def test_timeline_without_hold_still_catches_side_work():
    dev = NoHoldDevice()
    assert not _measure(dev, lambda: dev.launch(300e-6, side=True)).ok
    dev = NoHoldDevice()
    assert _measure(dev, lambda: dev.launch(300e-6)).ok


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (side-stream check on real streams)")
@pytest.mark.parametrize("waits", [True, False], ids=["side-waits-for-current", "side-starts-at-once"])
def test_side_stream_detected_on_gpu(waits):  # pragma: no cover - GPU only
    x = torch.randn(8192, 4096, device="cuda")  # each mul_ moves 256 MB: ~60 us, 20 of them >> host launch time
    side = torch.cuda.Stream()

    def cheat():
        if waits:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(20):
                x.mul_(1.0)

    def honest():
        for _ in range(20):
            x.mul_(1.0)

    def joined():  # fork-join: the current stream waits for the side stream, so the timer sees the work
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(20):
                x.mul_(1.0)
        torch.cuda.current_stream().wait_stream(side)

    bad = measure_side_stream_work(cheat)
    assert not bad.ok and "side stream" in bad.message, bad
    good = measure_side_stream_work(honest)
    assert good.ok and good.event_s > 400e-6, good  # 20 x 256 MB of traffic: the work is on the timed stream
    assert measure_side_stream_work(joined).ok


# ---- inputs and outputs -----------------------------------------------------------------------------
def test_mutation_is_caught(case):
    spec, inputs, outputs = case
    snap = InputSnapshot.take(inputs)
    assert snap.changed(inputs) == []
    load("v8_mutate").fn(**inputs, **outputs)
    (msg,) = snap.changed(inputs)
    assert "'x' was modified in place" in msg


def test_nan_inputs_compare_bitwise():
    t = torch.tensor([float("nan"), 1.0])
    snap = InputSnapshot.take({"t": t, "s": 0.5})
    assert snap.changed({"t": t, "s": 0.5}) == []
    assert "changed from 0.5" in snap.changed({"t": t, "s": 0.25})[0]


def test_lazy_and_foreign_returns_are_caught(case):
    spec, inputs, outputs = case
    lazy = load("v7_lazy").fn(**inputs, **outputs)
    assert "not the plain torch.Tensor" in check_returned(lazy, outputs, inputs)[0]
    other = load("v9_other").fn(**inputs, **outputs)
    assert "not the output buffer" in check_returned(other, outputs, inputs)[0]
    assert "tuple" in check_returned(outputs["y"], outputs, inputs)[0]
    honest = load("v0").fn(**inputs, **outputs)
    assert check_returned(honest, outputs, inputs) == []
    alias = {"y": inputs["x"]}
    assert "shares memory" in check_returned((inputs["x"],), alias, inputs)[-1]


def test_floor_check():
    assert floor_check(50e-6, 46e-6) is None
    assert floor_check(41.5e-6, 46e-6) is None  # within the 10% margin
    msg = floor_check(12e-6, 46e-6)
    assert msg and "faster than 0.9 x the physical floor" in msg and "measurement" in msg
    assert floor_check(0.0, 46e-6) and floor_check(float("nan"), 46e-6)
    with pytest.raises(ValueError):
        floor_check(1.0, float("inf"))


def _compare(spec, inputs, outputs) -> bool:
    ref = spec.reference(inputs)
    return all(r.ok for r in spec.compare(outputs, ref))


@pytest.mark.parametrize("name", ["v2_ptrcache", "v3_fingerprint", "v1_shapecache"])
def test_caches_caught_by_in_place_recheck(case, name):
    """The post-benchmark re-check: same buffers, new content (refill, then perturb) -> stale output."""
    spec, inputs, outputs = case
    cheat = load(name)
    for state in ("_CACHE", "_LAST"):  # start from an empty cache whatever ran before
        getattr(cheat.module, state, []).clear()
    cheat.fn(**inputs, **outputs)
    assert _compare(spec, inputs, outputs)  # the first call is right: only a re-check exposes it
    before = inputs["x"].clone()
    fresh = spec.make_inputs({"rows": 8, "cols": 32}, seed=99)
    msg = recheck_in_place(lambda: cheat.fn(**inputs, **outputs), spec, inputs, outputs, fresh=fresh, seed=5)
    assert msg and "after timing, with the timed input buffers" in msg and "result cache" in msg
    assert torch.equal(inputs["x"], before)  # the shared inputs are restored


def test_perturb_changes_one_slice_in_place(case):
    spec, inputs, outputs = case
    ptr, before = inputs["x"].data_ptr(), inputs["x"].clone()
    (changed,) = perturb_inputs_(inputs, seed=5)
    row = int(changed[2:-1])
    assert inputs["x"].data_ptr() == ptr and not torch.equal(inputs["x"][row], before[row])
    others = [r for r in range(8) if r != row]
    assert torch.equal(inputs["x"][others], before[others])


def test_honest_version_survives_the_recheck(case):
    spec, inputs, outputs = case
    v0 = load("v0")
    fresh = spec.make_inputs({"rows": 8, "cols": 32}, seed=42)
    assert recheck_in_place(lambda: v0.fn(**inputs, **outputs), spec, inputs, outputs, fresh=fresh, seed=3) is None
