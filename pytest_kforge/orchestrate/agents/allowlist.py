"""The write allowlist of an agent command, checked on the project tree before and after it runs.

An agent CLI (Claude Code, Codex, aider ...) edits files itself, so the path guard of our own
``write_file`` tool cannot stand in its way.  Instead the tree under the project root is
fingerprinted (size and mtime of every file) before the command and after it; every file created,
changed or deleted must be one :class:`~pytest_kforge.trust.paths.PathGuard` lets an agent write
(``kernels/<kernel>/``, ``docs/``, the role's extra folders, never the protected harness files) or
lie in the step's own task folder.  Files the command created outside the allowlist are removed;
changed or deleted ones are named so they can be restored (``git checkout -- <path>``).

What it does not see: writes outside the project root, and inside caches and the runs folder
(skipped below: pytest and compilers write there as a matter of course).  Run the CLI in its own
sandbox too (``codex exec --sandbox workspace-write``, Claude Code's permission mode) for those.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from .. import compat

__all__ = ["SKIP_DIRS", "TreeChanges", "tree_snapshot", "diff_trees", "Allowlist"]

#: folder names never scanned: caches every pytest or compiler run writes, VCS data, staged toolchains
SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".hypothesis", ".benchmarks", ".kforge-cache",
                       ".mypy_cache", ".ruff_cache", "node_modules", ".gpu", ".whl", ".tox"})


def tree_snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, int]]:
    """``{posix path relative to root: (size, mtime_ns)}`` of every regular file under ``root``."""
    root = Path(root).resolve()
    skipped = {Path(s).resolve() for s in skip}
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".venv")
                       and (here / d).resolve() not in skipped]
        for f in filenames:
            if f.endswith((".pyc", ".lock")):
                continue
            p = here / f
            try:
                st = p.lstat()
            except OSError:
                continue
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


@dataclasses.dataclass
class TreeChanges:
    created: list[str]
    modified: list[str]
    deleted: list[str]

    @property
    def all(self) -> list[str]:
        return [*self.created, *self.modified, *self.deleted]


def diff_trees(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> TreeChanges:
    return TreeChanges(sorted(set(after) - set(before)),
                       sorted(k for k in set(after) & set(before) if after[k] != before[k]),
                       sorted(set(before) - set(after)))


class Allowlist:
    """Where an agent command may write: the kernel's folder, ``docs/``, ``extra`` folders (relative to
    the root) and ``task_dir`` (its own exchange folder, wherever the runs folder is)."""

    def __init__(self, root: Path, kernels_dir: Path, kernel: str, *, extra: tuple[str, ...] = (),
                 task_dir: Path | None = None) -> None:
        self.root = Path(root).resolve()
        kdir = Path(kernels_dir).resolve()
        krel = kdir.relative_to(self.root).as_posix() if kdir.is_relative_to(self.root) else "kernels"
        self.folders = (f"{krel}/{kernel}/", "docs/", *extra)
        self.guard = compat.PathGuard(self.root, allowed=self.folders)
        self.task_dir = Path(task_dir).resolve() if task_dir is not None else None

    def allows(self, rel: str) -> bool:
        full = (self.root / rel).resolve()
        if self.task_dir is not None and full.is_relative_to(self.task_dir):
            return True
        try:
            self.guard.resolve_for_write(rel)
        except compat.PathRefused:
            return False
        return True

    def violations(self, changes: TreeChanges) -> list[str]:
        return [p for p in changes.all if not self.allows(p)]

    def undo(self, changes: TreeChanges, bad: list[str]) -> list[str]:
        """Remove the files in ``bad`` that the command created; returns the ones that cannot be undone
        here (changed or deleted files: restore them from version control)."""
        left = []
        for p in bad:
            if p in changes.created:
                try:
                    (self.root / p).unlink()
                except OSError:
                    left.append(p)
            else:
                left.append(p)
        return left
