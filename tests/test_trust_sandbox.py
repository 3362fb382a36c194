"""run_isolated: hangs, crashes, CUDA faults and exit codes are classified; the group is killed."""

from __future__ import annotations

import os
import sys
import time

import pytest

from pytest_kforge.trust import sandbox
from pytest_kforge.trust.sandbox import find_cuda_error, run_isolated

PY = sys.executable


def test_clean_run(tmp_path):
    r = run_isolated([PY, "-c", "print('hi')"], timeout_s=30, cwd=tmp_path, check_gpu_after=False)
    assert r.returncode == 0 and r.stdout.strip() == "hi" and r.reason is None and r.ok
    assert not r.timed_out and not r.crashed and r.gpu_ok is None


def test_hang_times_out_and_kills_the_whole_group(tmp_path):
    marker = tmp_path / "child.pid"
    code = ("import subprocess, sys, time\n"
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(60)\n")
    t0 = time.monotonic()
    r = run_isolated([PY, "-c", code], timeout_s=1.5, cwd=tmp_path, check_gpu_after=False)
    assert time.monotonic() - t0 < 20
    assert r.timed_out and "timed out after 1.5 s (hang)" in r.reason and not r.ok
    child = int(marker.read_text())
    for _ in range(50):  # the grandchild must be gone too (killed with the group, reaped by init)
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as fh:
            if fh.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {child} survived the timeout")


def test_simple_sleep_timeout(tmp_path):
    r = run_isolated([PY, "-c", "import time; time.sleep(60)"], timeout_s=1, cwd=tmp_path, check_gpu_after=False)
    assert r.timed_out and r.wall_s < 10


@pytest.mark.parametrize("code, sig", [("import os; os.abort()", "SIGABRT"),
                                       ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "SIGSEGV")])
def test_crash_is_classified(tmp_path, code, sig):
    r = run_isolated([PY, "-c", code], timeout_s=30, cwd=tmp_path, check_gpu_after=False)
    assert r.crashed and r.returncode is not None and r.returncode < 0
    assert f"killed by signal {sig} (crash)" in r.reason


def test_nonzero_exit_reports_last_stderr_line(tmp_path):
    r = run_isolated([PY, "-c", "import sys; sys.stderr.write('boom happened\\n'); sys.exit(3)"],
                     timeout_s=30, cwd=tmp_path, check_gpu_after=False)
    assert r.returncode == 3 and not r.crashed and r.reason == "exited with code 3: boom happened"


def test_cuda_error_in_stderr_fails_even_with_exit_zero(tmp_path):
    code = ("import sys; sys.stderr.write('RuntimeError: CUDA error: an illegal memory access was encountered\\n"
            "CUDA kernel errors might be asynchronously reported\\n')")
    r = run_isolated([PY, "-c", code], timeout_s=30, cwd=tmp_path, check_gpu_after=False)
    assert r.returncode == 0 and r.reason.startswith("CUDA error: ")
    assert "illegal memory access" in r.cuda_error


@pytest.mark.parametrize("text, want", [
    ("torch.AcceleratorError: CUDA error: unspecified launch failure", "CUDA error: unspecified launch failure"),
    ("cuda.bindings: CUDA_ERROR_ILLEGAL_ADDRESS raised", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("got cudaErrorMisalignedAddress from launch", "cudaErrorMisalignedAddress"),
    ("Assertion failed: device-side assert triggered", "device-side assert triggered"),
    ("all fine, 3 passed", None),
])
def test_find_cuda_error(text, want):
    got = find_cuda_error(text)
    assert (got is None) if want is None else (want in got)


def test_gpu_probe_after_failure(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sandbox, "gpu_present", lambda: True)
    monkeypatch.setattr(sandbox, "gpu_health_probe", lambda *a, **k: calls.append(1) or False)
    r = run_isolated([PY, "-c", "raise SystemExit(1)"], timeout_s=30, cwd=tmp_path)
    assert calls and r.gpu_ok is False and "health probe" in r.reason
    calls.clear()
    ok = run_isolated([PY, "-c", "pass"], timeout_s=30, cwd=tmp_path)
    assert not calls and ok.gpu_ok is None  # no probe after a clean run unless probe_always
    ok = run_isolated([PY, "-c", "pass"], timeout_s=30, cwd=tmp_path, probe_always=True)
    assert calls and ok.gpu_ok is False


def test_real_probe_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: the health probe allocates, adds and synchronises on the device")
    assert sandbox.gpu_health_probe(timeout_s=300) is True  # pragma: no cover - GPU only


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="needs a command"):
        run_isolated([], timeout_s=1, cwd=tmp_path)
    with pytest.raises(ValueError, match="positive"):
        run_isolated([PY], timeout_s=0, cwd=tmp_path)
