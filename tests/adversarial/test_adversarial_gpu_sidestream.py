"""GPU only, end to end: the real harness must reject a version that runs its work on a CUDA side stream.

One in-process pytester run of the harness (plus the kforge_trust plugin) on ``--kforge-device cuda``
over a tiny torch-language kernel written into the test's folder: ``y = 2 * x`` on a 8192 x 8192
float32 tensor, computed ``REPS`` times so a call moves ~5 GB (about 1.3 ms on an H200).  Versions:

* ``v0`` -- honest, everything on the current stream: its trial must pass;
* ``v1_joined`` -- fork-join on a side stream, the current stream waits for it: the timer sees the
  work, so it must pass too (no false positive on multi-stream kernels that join back);
* ``v2_side`` -- ``side.wait_stream(current)``, all work on the side stream, never joined back;
* ``v3_nowait`` -- all work on a side stream that does not even wait for the current stream;
* ``v4_hidden`` -- the work on the current stream, plus one SMALL side-stream kernel that does not
  wait for the current stream: it runs during the flush + spin before the start event and is gone
  before it, so neither the events nor the wall clock see it; only the stream audit
  (:func:`pytest_kforge.timing.stream_audit`, one profiled launch) can;
* ``v5_smalljoin`` -- the same small side kernel, but forked from and joined back to the current
  stream: honest, must pass the audit.

``v2_side``, ``v3_nowait`` and ``v4_hidden`` must fail their trial with the harness's side-stream
message (:func:`pytest_kforge.timing.side_stream_problem` or the stream audit).  The spec's floor
is zero, so the roofline floor check cannot be what catches them.  Skipped without CUDA.
"""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap

import pytest
import torch  # imported before pytester snapshots sys.modules: torch cannot be imported twice

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU: the side-stream check times real CUDA streams")

SIDE_STREAM_MESSAGE = "the work ran outside the timed stream"

SPEC = '''
from pytest_kforge.spec import KernelSpec, Tolerance


class SideStreamSpec(KernelSpec):
    name = "sidecheat"
    description = "y = 2 x, repeated (fixture for the side-stream check)"
    input_names = ("x",)
    output_names = ("y",)
    trials = {"big": {"rows": ROWS, "cols": 8192}}
    default_trials = ("big",)
    shrink_param = "rows"
    tolerances = {"y": Tolerance(max_abs=1e-6, rel_l2=1e-6)}

    def make_inputs(self, params, *, seed, device="cpu"):
        import torch

        gen = torch.Generator(device="cpu").manual_seed(seed)
        return {"x": torch.randn(params["rows"], params["cols"], generator=gen).to(device)}

    def params_from_inputs(self, inputs):
        rows, cols = inputs["x"].shape
        return {"rows": int(rows), "cols": int(cols)}

    def alloc_outputs(self, params, *, device="cpu"):
        import torch

        return {"y": torch.empty(params["rows"], params["cols"], dtype=torch.float32, device=device)}

    def reference(self, inputs, *, dtype=None):
        import torch

        return {"y": inputs["x"].to(dtype or torch.float32) * 2.0}

    # no floor: only the side-stream check may reject these versions
    def flops(self, params):
        return 0.0

    def min_bytes(self, params):
        return 0.0


SPEC = SideStreamSpec()
'''

HEADER = '''
LANGUAGE = "torch"
PARENT = {parent}
DESCRIPTION = {description!r}
CONFIG: dict = {{}}
REPS = 10  # 10 x (256 MB read + 256 MB write): about 1.3 ms of device work per call on an H200
'''

BODIES = {
    "v0": (None, "honest: current stream", '''
def run(x, *, y, config=None):
    import torch

    for _ in range(REPS):
        torch.mul(x, 2.0, out=y)
    return (y,)
'''),
    "v1_joined": ("v0", "fork-join on a side stream (joined back)", '''
def run(x, *, y, config=None):
    import torch

    if not x.is_cuda:
        for _ in range(REPS):
            torch.mul(x, 2.0, out=y)
        return (y,)
    current, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):
        for _ in range(REPS):
            torch.mul(x, 2.0, out=y)
    current.wait_stream(side)
    return (y,)
'''),
    "v2_side": ("v0", "CHEAT: work on a side stream that waits for the current one, never joined back", '''
def run(x, *, y, config=None):
    import torch

    if not x.is_cuda:
        for _ in range(REPS):
            torch.mul(x, 2.0, out=y)
        return (y,)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(REPS):
            torch.mul(x, 2.0, out=y)
    return (y,)
'''),
    "v3_nowait": ("v0", "CHEAT: work on a side stream that starts at once, never joined back", '''
def run(x, *, y, config=None):
    import torch

    if not x.is_cuda:
        for _ in range(REPS):
            torch.mul(x, 2.0, out=y)
        return (y,)
    with torch.cuda.stream(torch.cuda.Stream()):
        for _ in range(REPS):
            torch.mul(x, 2.0, out=y)
    return (y,)
'''),
    "v4_hidden": ("v0", "CHEAT: a small side-stream kernel that does not wait, hidden behind the spin", '''
_SCRATCH = []


def run(x, *, y, config=None):
    import torch

    for _ in range(REPS):
        torch.mul(x, 2.0, out=y)
    if x.is_cuda:
        if not _SCRATCH:
            _SCRATCH.append(torch.ones(1024, 1024, device=x.device))
        with torch.cuda.stream(torch.cuda.Stream()):  # no wait_stream: starts at once
            _SCRATCH[0].mul_(1.0)
    return (y,)
'''),
    "v5_smalljoin": ("v0", "the same small side kernel, forked and joined back (honest)", '''
_SCRATCH = []


def run(x, *, y, config=None):
    import torch

    if x.is_cuda:
        if not _SCRATCH:
            _SCRATCH.append(torch.ones(1024, 1024, device=x.device))
        current, side = torch.cuda.current_stream(), torch.cuda.Stream()
        side.wait_stream(current)
        with torch.cuda.stream(side):
            _SCRATCH[0].mul_(1.0)
        current.wait_stream(side)
    for _ in range(REPS):
        torch.mul(x, 2.0, out=y)
    return (y,)
'''),
}


def _plugin_args() -> list[str]:
    eps = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    core = "pytest_kforge.plugin" in eps or "pytest_kforge.plugin" in sys.modules
    return ([] if core else ["-p", "pytest_kforge.plugin"]) + (
        [] if "pytest_kforge.trust.plugin" in eps else ["-p", "pytest_kforge.trust.plugin"])


def run_harness(pytester: pytest.Pytester, device: str = "cuda", rows: int = 8192) -> dict[str, tuple[str, str]]:
    """Write the kernel, run the real harness in-process; test name -> (outcome, message)."""
    folder = pytester.path / "kernels" / "sidecheat"
    folder.mkdir(parents=True)
    (folder / "spec.py").write_text(SPEC.replace("ROWS", str(rows)))
    for name, (parent, description, body) in BODIES.items():
        head = HEADER.format(parent=repr(parent), description=description)
        (folder / f"{name}.py").write_text(textwrap.dedent(head) + body)
    pytester.makefile(".toml", pyproject='[tool.kforge]\nkernels_dir = "kernels"\n')
    reports: list[pytest.TestReport] = []

    class Recorder:
        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            reports.append(report)

    pytester.inline_run(*_plugin_args(), "--noconftest", "-p", "no:cacheprovider", "--kernel", "sidecheat",
                        "--kernel-version", "all", "--kforge-device", device, "--kforge-rounds", "10",
                        "--kforge-warmup", "2", "--kforge-seed", "1234", "--kforge-trust", "strict",
                        plugins=[Recorder()])
    out: dict[str, tuple[str, str]] = {}
    for rep in reports:
        name = rep.nodeid.rpartition("::")[2]
        outcome = ("failure" if rep.failed else "skipped" if rep.skipped else "passed",
                   rep.longreprtext if (rep.failed or rep.skipped) else "")
        if name not in out or out[name][0] == "passed":  # keep the first failure (setup or call)
            out[name] = outcome
    return out


def trials_of(results: dict[str, tuple[str, str]], version: str) -> dict[str, tuple[str, str]]:
    mine = {n: r for n, r in results.items()
            if n.startswith("test_trial") and (f"-{version}-" in n or n.endswith(f"-{version}]"))}
    assert mine, f"the harness generated no trial test for {version}: {sorted(results)}"
    return mine


def test_side_stream_versions_fail_their_trial_and_honest_ones_pass(pytester: pytest.Pytester) -> None:
    results = run_harness(pytester)
    for version in ("v0", "v1_joined", "v5_smalljoin"):
        mine = trials_of(results, version)
        assert all(o == "passed" for o, _ in mine.values()), f"{version} is honest but was rejected: {mine}"
    for version in ("v2_side", "v3_nowait", "v4_hidden"):
        mine = trials_of(results, version)
        failed = [m for o, m in mine.values() if o == "failure"]
        assert failed, f"{version} ran on a side stream and its trial passed: {mine}"
        assert all(SIDE_STREAM_MESSAGE in m for m in failed), f"{version} failed for another reason: {failed}"
    correctness = {n: r for n, r in results.items() if not n.startswith("test_trial") and "-v0" in n}
    assert any(o == "passed" for o, _ in correctness.values()), correctness  # the harness ran more than trials


def _small_side_kernel(join: bool) -> None:
    """A 2 x 1024 x 1024 side-stream mul_ next to 256 MB of work on the current stream."""
    x = _TENSORS.setdefault("x", torch.ones(8192, 8192, device="cuda"))
    scratch = _TENSORS.setdefault("s", torch.ones(1024, 1024, device="cuda"))
    current, side = torch.cuda.current_stream(), torch.cuda.Stream()
    if join:
        side.wait_stream(current)
    with torch.cuda.stream(side):
        scratch.mul_(1.0)
        scratch.mul_(1.0)
    if join:
        current.wait_stream(side)
    x.mul_(1.0)


_TENSORS: dict[str, torch.Tensor] = {}


def test_stream_audit_directly() -> None:
    from pytest_kforge.timing import stream_audit

    notes: list[str] = []
    assert stream_audit(lambda: _TENSORS.setdefault("x", torch.ones(8192, 8192, device="cuda")).mul_(1.0),
                        notes=notes) is None
    assert not any("unavailable" in n for n in notes), notes  # the audit really ran on this torch
    assert stream_audit(lambda: _small_side_kernel(join=True), notes=notes) is None, notes
    msg = stream_audit(lambda: _small_side_kernel(join=False), notes=notes)
    assert msg is not None and SIDE_STREAM_MESSAGE in msg and "2 kernels on stream" in msg, (msg, notes)
