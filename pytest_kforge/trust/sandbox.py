"""Run an untrusted command in its own process group with a wall-clock limit, and say what happened.

``run_isolated`` starts the command in a new session (so it and every child it spawns share one
process group), captures stdout/stderr through temporary files (a grandchild that keeps a pipe
open cannot make us hang), and on timeout kills the whole group with SIGKILL: a kernel stuck in a
GPU spin loop does not answer SIGTERM.  After a normal exit the group is killed as well, so no
background child outlives the run.

Outcomes, in the order they are reported in ``reason``:

* ``timed out after N s (hang)`` -- ``timed_out``;
* ``CUDA error: <message>`` -- found in the output (an illegal memory access, an unspecified
  launch failure, a ``CUDA_ERROR_*`` / ``cudaError*`` code, a device-side assert ...), even when
  the process caught it and exited 0: after such a fault the CUDA context is unusable;
* ``killed by signal SIGSEGV (crash)`` -- ``crashed``;
* ``exited with code N: <last stderr line>``.

Then, when ``check_gpu_after`` is set, a GPU exists and the run failed (or ``probe_always``), a
fresh process allocates two tensors, adds them, synchronises and checks the sum: ``gpu_ok`` is
its verdict (None when no probe ran).
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
from typing import IO
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["SandboxResult", "run_isolated", "find_cuda_error", "gpu_present", "gpu_health_probe",
           "GPU_PROBE_CODE"]

#: the most output kept per stream (the tail: errors are printed last)
MAX_OUTPUT_CHARS = 2_000_000

_CUDA_PATTERNS = [
    re.compile(p, re.I)
    for p in (
        r"an illegal memory access was encountered",
        r"unspecified launch failure",
        r"misaligned address",
        r"an illegal instruction was encountered",
        r"device-side assert(?:ion)? triggered",
        r"CUDA_ERROR_[A-Z_]+",
        r"cudaError[A-Z][A-Za-z]+",
        r"CUDA error: [^\n]+",
        r"CUDA driver error: [^\n]+",
        r"uncorrectable ECC error encountered",
        r"the launch timed out and was terminated",
        r"CUDA_EXCEPTION_\d+[^\n]*",
    )
]

GPU_PROBE_CODE = """
import sys
try:
    import torch
except Exception as exc:
    print("KFORGE_PROBE NOTORCH", exc); sys.exit(3)
if not torch.cuda.is_available():
    print("KFORGE_PROBE NOGPU"); sys.exit(3)
a = torch.full((1 << 20,), 1.5, device="cuda")
b = torch.full((1 << 20,), 2.25, device="cuda")
c = a + b
torch.cuda.synchronize()
ok = bool((c == 3.75).all().item())
print("KFORGE_PROBE OK" if ok else "KFORGE_PROBE WRONG")
sys.exit(0 if ok else 1)
"""


@dataclasses.dataclass
class SandboxResult:
    """What one isolated run did; ``reason`` is None only for a clean exit 0."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    crashed: bool
    reason: str | None
    gpu_ok: bool | None
    wall_s: float
    cuda_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None and self.gpu_ok is not False


def find_cuda_error(text: str) -> str | None:
    """The first CUDA fault message in ``text`` (the matched phrase), or None."""
    best: tuple[int, str] | None = None
    for pat in _CUDA_PATTERNS:
        m = pat.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), m.group(0).strip())
    return best[1] if best else None


def gpu_present() -> bool:
    """Cheap test for an NVIDIA GPU (no torch import): the driver's device nodes or proc entry."""
    return os.path.exists("/dev/nvidia0") or os.path.isdir("/proc/driver/nvidia/gpus")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_tail(fh: IO[bytes], max_chars: int | None = MAX_OUTPUT_CHARS) -> str:
    fh.flush()
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0 if max_chars is None else max(0, size - max_chars * 2))
    text = fh.read().decode("utf-8", errors="replace")
    return text if max_chars is None else text[-max_chars:]


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output on stderr)"


def spawn(cmd: Sequence[str], timeout_s: float, cwd: str | Path, env: Mapping[str, str] | None,
          *, max_chars: int | None = MAX_OUTPUT_CHARS) -> tuple[int | None, str, str, bool, float]:
    """Run ``cmd`` in its own session with output in temp files (a child holding a pipe cannot
    hang us); on timeout, or when it leaves children behind, kill its whole process group.

    Returns ``(returncode, stdout, stderr, timed_out, wall_s)``; each stream keeps its last
    ``max_chars`` characters (``None``: all of it).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(list(cmd), cwd=str(cwd), env=None if env is None else dict(env),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
        finally:
            if proc.returncode is None:  # interrupted while waiting: never leave it running
                _kill_group(proc.pid)
                proc.wait()
        wall = time.monotonic() - t0
        _kill_group(proc.pid)  # children left behind after the leader exited
        return proc.returncode, _read_tail(out, max_chars), _read_tail(err, max_chars), timed_out, wall


def gpu_health_probe(timeout_s: float = 120.0, python: str | None = None) -> bool | None:
    """Run :data:`GPU_PROBE_CODE` in a fresh process: True healthy, False broken, None no GPU/torch."""
    rc, out, err, timed_out, _ = spawn([python or sys.executable, "-c", GPU_PROBE_CODE], timeout_s,
                                        os.getcwd(), None)
    if timed_out:
        return False
    if "KFORGE_PROBE OK" in out and rc == 0:
        return True
    if rc == 3 and ("KFORGE_PROBE NOGPU" in out or "KFORGE_PROBE NOTORCH" in out):
        return None
    return False


def run_isolated(
    cmd: list[str],
    *,
    timeout_s: float,
    cwd: str | Path,
    env: dict[str, str] | None = None,
    check_gpu_after: bool = True,
    probe_always: bool = False,
) -> SandboxResult:
    """Run ``cmd`` isolated (see the module docstring).  ``env`` is the child's whole environment
    (None: inherit ours).  The GPU probe runs after a failed run, or after every run with
    ``probe_always``."""
    if not cmd:
        raise ValueError("run_isolated needs a command, e.g. [sys.executable, '-m', 'pytest', ...]")
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    rc, out, err, timed_out, wall = spawn(cmd, timeout_s, cwd, env)
    cuda_error = find_cuda_error(err) or find_cuda_error(out)
    crashed = rc is not None and rc < 0 and not timed_out
    reasons: list[str] = []
    if timed_out:
        reasons.append(f"timed out after {timeout_s:g} s (hang); its whole process group was killed")
    if cuda_error:
        reasons.append(f"CUDA error: {cuda_error}")
    if crashed:
        reasons.append(f"killed by signal {_signal_name(-rc)} (crash)")  # type: ignore[operator]
    elif not timed_out and rc not in (0, None):
        reasons.append(f"exited with code {rc}: {_last_line(err)}")
    reason = "; ".join(reasons) or None
    gpu_ok: bool | None = None
    if check_gpu_after and (reason is not None or probe_always) and gpu_present():
        gpu_ok = gpu_health_probe()
        if gpu_ok is False:
            reason = (reason + "; " if reason else "") + "the GPU failed a health probe afterwards"
    return SandboxResult(rc, out, err, timed_out, crashed, reason, gpu_ok, wall, cuda_error)
