"""Raw run artifacts packed into ``.tar.xz`` archives, read as if they were still loose files.

The checkout keeps human-readable summaries loose (devlog, ``reports/<kernel>/<version>/<trial>.md``, a run's
``*.md``) and packs the raw files they were read from (suite and compare JSON, logs, ncu CSVs and ``.ncu-rep``,
report JSON twins) into archives beside them: one file of xz compresses the many similar JSON and CSV files of
a day ten to twenty times better than gzipping each (see the README's artifact policy).

An archive ``<dir>/<name>.tar.xz`` holds paths relative to ``<dir>``, each stored uncompressed (``x.json``, not
``x.json.gz``).  :func:`read_bytes` and :func:`exists` take the path a file had when loose: when it is not on
disk they look for it in the archives of each folder above it, and a ``.gz`` path matches its uncompressed
member (the bytes come back gzipped, so a reader of ``x.json.gz`` needs no change).  :func:`glob` lists loose and
archived files together.  Packing::

    python -m pytest_kforge.artifacts pack ARCHIVE.tar.xz DIR...   # DIRs' raw files into ARCHIVE, then removed
    python -m pytest_kforge.artifacts list ARCHIVE.tar.xz
    python -m pytest_kforge.artifacts extract ARCHIVE.tar.xz [DEST]  # loose again, beside the archive by default
    python -m pytest_kforge.artifacts restore ARCHIVE.tar.xz        # an archive that left the tree, from git history
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import io
import lzma
import os
import sys
import subprocess
import tarfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

__all__ = ["RAW_SUFFIXES", "exists", "extract", "glob", "list_members", "main", "pack", "read_bytes"]

#: what counts as raw (packed); everything else (``.md``, ``.png``, ``.sh``) stays loose
RAW_SUFFIXES = (".json", ".jsonl", ".log", ".txt", ".csv", ".ncu-rep", ".gz")


@lru_cache(maxsize=64)
def _members(archive: Path, mtime_ns: int) -> frozenset[str]:
    with tarfile.open(archive, "r:xz") as tf:
        return frozenset(m.name.removeprefix("./") for m in tf.getmembers() if m.isfile())


def _archives_for(path: Path) -> list[tuple[Path, str]]:
    """(archive, member) pairs that may hold ``path``: the archives of each folder above it, nearest first."""
    path = Path(os.path.abspath(path))
    out = []
    for d in path.parents:
        if d.is_dir():
            rel = path.relative_to(d).as_posix()
            out += [(a, rel) for a in sorted(d.glob("*.tar.xz"))]
    return out


def _find(path: Path) -> tuple[Path, str, bool] | None:
    """(archive, member, gzip the bytes) for a path that is not on disk, or None."""
    for archive, rel in _archives_for(path):
        names = _members(archive, archive.stat().st_mtime_ns)
        if rel in names:
            return archive, rel, False
        if rel.endswith(".gz") and rel[:-3] in names:
            return archive, rel[:-3], True
    return None


def exists(path: str | Path) -> bool:
    """Whether ``path`` is a file on disk or in an archive above it."""
    p = Path(path)
    return p.is_file() or _find(p) is not None


def read_bytes(path: str | Path) -> bytes:
    """The bytes of ``path``, from disk or from the archive that holds it; FileNotFoundError when neither does."""
    p = Path(path)
    if p.is_file():
        return p.read_bytes()
    hit = _find(p)
    if hit is None:
        raise FileNotFoundError(f"{p} is neither on disk nor in a .tar.xz archive of a folder above it")
    archive, member, gz = hit
    data = _contents(archive, archive.stat().st_mtime_ns)[member]
    return gzip.compress(data, mtime=0) if gz else data


@lru_cache(maxsize=4)
def _contents(archive: Path, mtime_ns: int) -> dict[str, bytes]:
    """Every member of ``archive`` (one pass: an xz stream is read from its start for any member)."""
    with tarfile.open(archive, "r:xz") as tf:
        return {m.name.removeprefix("./"): f.read() for m in tf.getmembers()
                if m.isfile() and (f := tf.extractfile(m)) is not None}


def glob(folder: str | Path, pattern: str) -> list[Path]:
    """Loose files under ``folder`` matching ``pattern`` (a relative glob such as ``*/*.json.gz`` or ``**/x*.json``) and archived
    ones (as the paths they had when loose; a ``.gz`` pattern also matches an uncompressed member), sorted."""
    root = Path(folder)
    found = {p for p in root.glob(pattern) if p.is_file()}
    absroot = Path(os.path.abspath(root))
    for d in (absroot, *absroot.parents):
        for archive in sorted(d.glob("*.tar.xz")) if d.is_dir() else ():
            prefix = absroot.relative_to(d).as_posix()
            for name in _members(archive, archive.stat().st_mtime_ns):
                if prefix != "." and not name.startswith(prefix + "/"):
                    continue
                rel = name if prefix == "." else name[len(prefix) + 1:]
                for cand in (rel, rel + ".gz"):
                    if fnmatch.fnmatch(cand, pattern) and ("**" in pattern or cand.count("/") == pattern.count("/")):
                        found.add(root / cand)
    return sorted(found)


def _raw_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(RAW_SUFFIXES)
                  and not p.name.endswith(".tar.xz"))


def pack(archive: str | Path, folders: Sequence[str | Path], *, remove: bool = True) -> list[Path]:
    """Add the raw files under ``folders`` to ``archive`` (members relative to the archive's folder, ``.gz``
    files stored uncompressed), keeping what the archive already holds; returns the files packed.

    Each member is read back and compared before any loose file is removed, so a failed write loses nothing.
    """
    archive = Path(archive)
    base = archive.parent
    files = [f for d in folders for f in _raw_files(Path(d))]
    if not files:
        return []
    entries: dict[str, bytes] = {}
    if archive.exists():
        with tarfile.open(archive, "r:xz") as tf:
            for m in tf.getmembers():
                f = tf.extractfile(m) if m.isfile() else None
                if f is not None:
                    entries[m.name.removeprefix("./")] = f.read()
    for path in files:
        rel = path.relative_to(base).as_posix()
        data = path.read_bytes()
        if rel.endswith(".gz"):
            rel, data = rel[:-3], gzip.decompress(data)
        if rel in entries and entries[rel] != data:
            raise ValueError(f"{archive} already holds a different {rel}; extract it and compare before packing")
        entries[rel] = data
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tf:  # type: ignore[call-overload]  # xz -9e
        for rel in sorted(entries):
            info = tarfile.TarInfo(rel)
            info.size, info.mtime, info.mode = len(entries[rel]), 0, 0o644
            tf.addfile(info, io.BytesIO(entries[rel]))
    with tarfile.open(tmp, "r:xz") as tf:  # read back before anything loose goes
        for rel, data in entries.items():
            member = tf.extractfile(rel)
            if member is None or member.read() != data:
                tmp.unlink()
                raise OSError(f"{tmp}: member {rel} did not read back; nothing was removed")
    tmp.replace(archive)
    if remove:
        for path in files:
            path.unlink()
    return files


def list_members(archive: str | Path) -> list[str]:
    """The member paths of ``archive``, sorted."""
    a = Path(archive)
    return sorted(_members(a, a.stat().st_mtime_ns))


def extract(archive: str | Path, dest: str | Path | None = None) -> int:
    """Write every member of ``archive`` under ``dest`` (default: the archive's folder); returns the count."""
    archive = Path(archive)
    out = Path(dest) if dest else archive.parent
    n = 0
    with tarfile.open(archive, "r:xz") as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m) if m.isfile() else None
            target = (out / m.name).resolve()
            if f is None or not target.is_relative_to(out.resolve()):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.read())
            n += 1
    return n


def restore(archive: str | Path) -> str:
    """Write back an archive that left the working tree (README "Artifacts") from the last commit that held it.

    Returns that commit; raises :class:`FileNotFoundError` when no commit of this clone has the path (a shallow
    clone: ``git fetch --unshallow`` first).
    """
    path = Path(archive).resolve()
    here = next(d for d in path.parents if d.is_dir())  # git rm may have removed the emptied folder
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=here,
                         capture_output=True, text=True, check=True).stdout.strip()
    rel = path.relative_to(top).as_posix()
    last = subprocess.run(["git", "log", "-1", "--format=%H", "--diff-filter=D", "--", rel], cwd=top,
                          capture_output=True, text=True, check=True).stdout.strip()
    if not last:
        raise FileNotFoundError(f"no commit of this clone removed {rel}; a shallow clone lacks the history "
                                "(git fetch --unshallow), or the archive never left the tree")
    blob = subprocess.run(["git", "show", f"{last}^:{rel}"], cwd=top, capture_output=True, check=True).stdout
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    return f"{last}^"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.artifacts", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="pack the raw files of folders into an archive (then remove them)")
    p.add_argument("archive")
    p.add_argument("folders", nargs="+")
    p.add_argument("--keep", action="store_true", help="keep the loose files")
    p = sub.add_parser("list", help="the members of an archive")
    p.add_argument("archive")
    p = sub.add_parser("restore", help="bring back an archive that left the tree, from git history")
    p.add_argument("archive")
    p = sub.add_parser("extract", help="write an archive's members out again")
    p.add_argument("archive")
    p.add_argument("dest", nargs="?")
    args = ap.parse_args(argv)
    if not args.archive.endswith(".tar.xz"):
        ap.error(f"{args.archive}: an archive name must end in .tar.xz")
    if args.cmd == "pack":
        bad = [d for d in args.folders if not Path(d).resolve().is_relative_to(Path(args.archive).resolve().parent)]
        if bad:
            ap.error(f"{', '.join(bad)}: pack folders at or below the archive's folder, so members keep their paths")
        files = pack(args.archive, args.folders, remove=not args.keep)
        print(f"{args.archive}: {len(files)} files packed ({Path(args.archive).stat().st_size if files else 0} bytes)")
    elif args.cmd == "restore":
        try:
            print(f"{args.archive}: restored from commit {restore(args.archive)} (git-ignored: do not re-add it)")
        except (OSError, subprocess.CalledProcessError) as exc:
            ap.error(f"cannot restore {args.archive}: {exc}")
    elif args.cmd == "list":
        print("\n".join(list_members(args.archive)))
    else:
        print(f"{extract(args.archive, args.dest)} files written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
