"""Safe file updates shared by the devlog, the knowledge base, reports and orchestrator runs.

* :func:`atomic_write_text` writes a temporary file in the same folder, fsyncs it and renames it
  over the target, so a kill at any point leaves either the old or the new file, never half.
* :func:`file_lock` is an advisory ``fcntl`` lock on ``<path>.lock`` so two runs on one kernel do
  not interleave their read-modify-write cycles.
* :func:`replace_marked_block` rewrites only the text between ``<!-- kforge:KEY:start -->`` and
  ``<!-- kforge:KEY:end -->``, keeping every human edit outside the markers.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_write_text", "atomic_write_bytes", "atomic_write_gz_text", "read_text_gz", "file_lock",
           "replace_marked_block", "LockTimeout"]


class LockTimeout(TimeoutError):
    pass


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_gz_text(path: str | Path, text: str) -> Path:
    """``text`` gzipped into ``path`` atomically, with no timestamp in the gzip header (the same text gives the
    same bytes, so a regenerated file does not show as changed); returns the path."""
    import gzip

    atomic_write_bytes(path, gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return Path(path)


def read_text_gz(path: str | Path, errors: str = "strict") -> str:
    """A text file's contents, gunzipped when its name ends in ``.gz`` (raises OSError / EOFError on a bad gzip)."""
    import gzip

    p = Path(path)
    if p.name.endswith(".gz"):
        return gzip.decompress(p.read_bytes()).decode("utf-8", errors=errors)
    return p.read_text(encoding="utf-8", errors=errors)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: a reader sees the old or the new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; keep the target's mode, or the umask's default for a new file
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def file_lock(path: str | Path, timeout: float = 60.0) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``<path>.lock`` (waits up to ``timeout`` seconds)."""
    import fcntl

    lock_path = Path(f"{path}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(
                        f"{path} is locked by another kforge process (lock file {lock_path}); "
                        f"wait for it to finish or remove the lock file if no kforge process is running"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _markers(key: str) -> tuple[str, str]:
    return f"<!-- kforge:{key}:start -->", f"<!-- kforge:{key}:end -->"


def replace_marked_block(path: str | Path, key: str, body: str, *, heading: str | None = None) -> str:
    """Replace the block ``key`` in ``path`` with ``body`` (appending it, under ``heading``, if absent).

    Returns the new file text.  Locks the file and writes atomically.
    """
    path = Path(path)
    start, end = _markers(key)
    with file_lock(path):
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        block = f"{start}\n{body.rstrip()}\n{end}"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if pattern.search(text):
            new = pattern.sub(lambda _m: block, text, count=1)
        else:
            sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
            new = text + sep + (f"{heading}\n\n" if heading else "") + block + "\n"
        atomic_write_text(path, new)
        return new
