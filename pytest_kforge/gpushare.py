"""Exclusive GPU use across processes: the per-GPU file lock, and xdist workers sharing one GPU.

:func:`gpu_lock` is a machine-wide advisory lock per GPU id.  With ``--kforge-workers-per-gpu K``
(K > 1, see :mod:`pytest_kforge.xdist`) the controller pins up to K workers to each GPU and
tells each one, through ``$KFORGE_XDIST_SHARE``, that it shares its GPU (``$KFORGE_XDIST_GPU``).
Every GPU section of the core harness (the calls, inputs, reference and compare of
:func:`~pytest_kforge.correctness.check_version`; inputs, warm-up, timing, stream audit and
re-check of :func:`~pytest_kforge.bench.run_trial`) then runs inside :func:`gpu_section`: the
version's ``prepare(params, config)`` (compile without launching, when the module defines it;
``prepare(params, config, input_kwargs=...)`` when it takes that keyword, for the extra arguments
the inputs are made with, e.g. the fuzz test's per-sequence lengths) first, in parallel with the
other workers, then the body under the GPU's lock, so no two workers ever use the GPU at once.

Not shared (no xdist, K = 1, a worker without a GPU): :func:`gpu_section` does nothing at all,
no lock and no ``prepare`` call.

Each shared section also adds its compile (``prepare``), lock-wait and lock-held seconds to this process's
:func:`section_summary`, which the xdist worker hands to the controller (``workers`` in ``--kforge-json``, one
line in the terminal summary): run 24's cuTile part took twice run 21's wall with the GPU as idle, and only such
a split says whether compiles inside the lock, waits, or GPU work set a parallel run's time.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .fsutil import LockTimeout, file_lock

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version

__all__ = ["ENV_PINNED", "ENV_SHARE", "LOCK_TIMEOUT_S", "gpu_lock", "gpu_section", "section_summary", "shared_gpu"]

ENV_PINNED = "KFORGE_XDIST_GPU"  # set in an xdist worker by the controller: the GPU it is pinned to
ENV_SHARE = "KFORGE_XDIST_SHARE"  # ... and how many workers share that GPU (K)
#: how long a worker waits for its GPU: the other K-1 workers' sections, each one trial at most
LOCK_TIMEOUT_S = 3 * 3600.0
#: how many of this process's longest lock holds :func:`section_summary` names
TOP_HOLDS = 5

_TOTALS: dict[str, float] = {"sections": 0, "prepare_s": 0.0, "wait_s": 0.0, "held_s": 0.0}
_HOLDS: list[tuple[float, str]] = []  # (held s, test id), the TOP_HOLDS longest


def _record(wait_s: float, held_s: float) -> None:
    """Count one section that held the lock (its prepare time is added as it ends, failed compiles included)."""
    _TOTALS["sections"] += 1
    _TOTALS["wait_s"] += wait_s
    _TOTALS["held_s"] += held_s
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    _HOLDS.append((held_s, test))
    _HOLDS.sort(reverse=True)
    del _HOLDS[TOP_HOLDS:]


def section_summary() -> dict[str, Any]:
    """This process's shared GPU sections so far: their count, the seconds spent in ``prepare`` (compiling outside
    the lock), waiting for the lock and holding it, and the longest holds, e.g. ``{"sections": 12, "prepare_s":
    40.2, "wait_s": 95.0, "held_s": 61.3, "longest_holds": [{"test": "...::test_fuzz[mla-v3]", "held_s": 30.1}]}``
    (all zero when no section was shared)."""
    out: dict[str, Any] = {k: (int(v) if k == "sections" else round(v, 1)) for k, v in _TOTALS.items()}
    out["longest_holds"] = [{"test": t, "held_s": round(h, 1)} for h, t in _HOLDS]
    return out


@contextlib.contextmanager
def gpu_lock(gpu: str | None = None, *, timeout: float = 3600.0) -> Iterator[None]:
    """Hold the machine-wide lock of one GPU (default: the first one this process sees).

    Lock files live in ``$KFORGE_LOCK_DIR`` or ``<tmp>/kforge-gpu-locks``; they are advisory
    (``fcntl``), so a crashed holder never leaves the GPU locked.
    """
    if gpu is None:
        ids = visible_ids()
        gpu = ids[0] if ids else "0"
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", str(gpu))
    lock_dir = Path(os.environ.get("KFORGE_LOCK_DIR") or Path(tempfile.gettempdir()) / "kforge-gpu-locks")
    with file_lock(lock_dir / f"gpu-{safe}", timeout=timeout):
        yield


def visible_ids() -> list[str] | None:
    """The GPU ids ``$CUDA_VISIBLE_DEVICES`` lists (``[]`` for ``-1``), or None when it is unset."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return None
    ids = [x.strip() for x in cvd.split(",") if x.strip()]
    return [] if ids[:1] == ["-1"] else ids


def shared_gpu() -> str | None:
    """The GPU id this process shares with other xdist workers, or None when its GPU is its own."""
    gpu = os.environ.get(ENV_PINNED)
    share = os.environ.get(ENV_SHARE, "")
    return gpu if gpu and share.isdigit() and int(share) > 1 else None


def _drain_gpu() -> None:
    """Finish this process's GPU work and return its cached blocks before the next worker's turn."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    # an error here (a sticky CUDA fault) surfaces at the next CUDA call; do not mask the body's own
    with contextlib.suppress(Exception):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # other workers' inputs must fit: do not shrink a trial for our cache


def _takes_input_kwargs(prepare: Any) -> bool:
    try:
        return "input_kwargs" in inspect.signature(prepare).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


@contextlib.contextmanager
def gpu_section(version: Version, params: Mapping[str, Any],
                input_kwargs: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Run the body as one exclusive GPU section of ``version`` on ``params`` (see the module docstring).

    When the GPU is shared: call ``version.module.prepare(dict(params), dict(version.config))``
    if it exists (with ``input_kwargs=`` the inputs' extra arguments when it takes that keyword;
    outside the lock; whatever it raises propagates, as the kernel call's error would), then hold
    the GPU's lock for the body, synchronising and emptying torch's cache before releasing it.
    Waiting longer than :data:`LOCK_TIMEOUT_S` raises :class:`LockTimeout`.
    Not shared: the body runs as is.
    """
    gpu = shared_gpu()
    if gpu is None:
        yield
        return
    prepare = getattr(getattr(version, "module", None), "prepare", None)  # peers' shims have no module
    t0 = time.perf_counter()
    try:
        if callable(prepare):
            if _takes_input_kwargs(prepare):
                prepare(dict(params), dict(version.config), input_kwargs=dict(input_kwargs or {}))
            else:
                prepare(dict(params), dict(version.config))
    finally:
        t1 = time.perf_counter()
        _TOTALS["prepare_s"] += t1 - t0
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(gpu_lock(gpu, timeout=LOCK_TIMEOUT_S))
        except LockTimeout as exc:
            raise LockTimeout(f"xdist worker {os.environ.get('PYTEST_XDIST_WORKER', '?')} waited more than "
                              f"{LOCK_TIMEOUT_S / 3600:g} h for GPU {gpu}, which it shares with other workers "
                              f"(--kforge-workers-per-gpu): a GPU section is hung; stop the run and find it") from exc
        t2 = time.perf_counter()
        try:
            yield
        finally:
            _drain_gpu()
            _record(t2 - t1, time.perf_counter() - t2)
