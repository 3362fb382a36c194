"""Where an agent may write: only under ``kernels/<kernel>/`` and ``docs/`` of the project.

:class:`PathGuard` turns an agent-supplied relative path into an absolute path it may write,
or raises :class:`PathRefused` with one sentence saying why.  Refused: empty paths, NUL bytes,
absolute paths (``/x``, ``~/x``, ``C:\\x``), any ``..`` component, backslashes, any existing
component that is a symlink (even one pointing inside the root: a link can be re-aimed later),
anything whose resolved path leaves the root, anything outside the allowed folders, and the
protected files that steer the harness (``tests/``, ``pytest_kforge/``, ``conftest.py`` at any
depth, ``pyproject.toml``, ``kforge.toml``, ``tox.ini``, ``.ci/``, ``agents/`` ...), even when
they sit inside an allowed folder, because pytest would import or obey them.

:meth:`PathGuard.write_text` writes through :func:`pytest_kforge.fsutil.atomic_write_text`,
whose final ``os.replace`` swaps the directory entry rather than following a link, so a
symlink planted between the check and the write cannot redirect the data.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ..errors import KforgeError

__all__ = ["PathGuard", "PathRefused", "PROTECTED_DIRS", "PROTECTED_NAMES"]

#: top-level folders no agent may write into (unless named explicitly in ``allowed``)
PROTECTED_DIRS: tuple[str, ...] = ("tests", "pytest_kforge", ".ci", "agents", ".git", ".github", "benchmarks")
#: file names no agent may write at any depth: pytest and packaging obey or import them
PROTECTED_NAMES: frozenset[str] = frozenset({
    "conftest.py", "pyproject.toml", "kforge.toml", "tox.ini", "pytest.ini", "setup.cfg", "setup.py",
    "sitecustomize.py", "usercustomize.py",
})
_PROTECTED_SUFFIXES = (".pth",)


class PathRefused(KforgeError, PermissionError):
    """An agent asked to write somewhere it may not; the message is one sentence."""


def _norm_folder(folder: str) -> str:
    f = folder.replace("\\", "/").strip("/")
    return f + "/" if f else ""


class PathGuard:
    """Resolve agent-supplied relative paths for writing, refusing anything outside ``allowed``.

    ``allowed`` lists folders relative to ``root`` (``"kernels/mla/"``, ``"docs/"``); use
    :meth:`for_kernel` for the usual pair.  A protected top-level folder (``agents/``, say)
    becomes writable only when ``allowed`` names it or a folder inside it explicitly.
    """

    def __init__(self, root: str | Path, allowed: Iterable[str] = ("docs/",)) -> None:
        self.root = Path(root).resolve()
        self.allowed: tuple[str, ...] = tuple(_norm_folder(a) for a in allowed if _norm_folder(a))
        if not self.allowed:
            raise ValueError("PathGuard needs at least one allowed folder, e.g. ('kernels/mla/', 'docs/')")

    @classmethod
    def for_kernel(cls, root: str | Path, kernel: str, *extra: str) -> PathGuard:
        """The agent's usual rights: ``kernels/<kernel>/`` and ``docs/`` (plus ``extra`` folders)."""
        if not kernel or "/" in kernel or "\\" in kernel or kernel in (".", ".."):
            raise ValueError(f"kernel name {kernel!r} must be a plain folder name such as 'mla'")
        return cls(root, (f"kernels/{kernel}/", "docs/", *extra))

    # ---- checks ------------------------------------------------------------------------------
    def _refuse(self, rel: object, why: str) -> PathRefused:
        return PathRefused(f"refused to write {rel!r}: {why}; agents may write only under "
                           f"{', '.join(self.allowed)} of {self.root}")

    def _lexical(self, rel_path: str | os.PathLike[str]) -> PurePosixPath:
        """The relative path, normalised, after every check that needs no file system."""
        if not isinstance(rel_path, (str, os.PathLike)):
            raise self._refuse(rel_path, f"a path must be a string, not {type(rel_path).__name__}")
        raw = os.fspath(rel_path)
        if isinstance(raw, bytes):  # pragma: no cover - bytes PathLike
            raise self._refuse(raw, "a path must be text, not bytes")
        if "\x00" in raw:
            raise self._refuse(raw, "the path contains a NUL byte")
        if not raw.strip():
            raise self._refuse(raw, "the path is empty")
        if "\\" in raw:
            raise self._refuse(raw, "backslashes are not allowed in paths (use '/')")
        if raw.startswith(("/", "~")) or (len(raw) > 1 and raw[1] == ":") or os.path.isabs(raw):
            raise self._refuse(raw, "absolute paths are not allowed (give a path relative to the project root)")
        parts = [p for p in raw.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise self._refuse(raw, "'..' components are not allowed")
        if not parts:
            raise self._refuse(raw, "the path names no file")
        return PurePosixPath(*parts)

    def _check_allowed(self, raw: object, rel: PurePosixPath) -> None:
        posix = rel.as_posix()
        explicit = [a for a in self.allowed if (posix + "/").startswith(a)]
        if not explicit:
            raise self._refuse(raw, "it is outside the allowed folders")
        name = rel.name
        if name in PROTECTED_NAMES or name.endswith(_PROTECTED_SUFFIXES):
            raise self._refuse(raw, f"{name} steers pytest or packaging and is never writable")
        for part in rel.parts[:-1]:
            if part in PROTECTED_NAMES:
                raise self._refuse(raw, f"{part} is a protected file, not a folder")
        top = rel.parts[0]
        if top in PROTECTED_DIRS and not any(a.split("/")[0] == top for a in explicit):
            raise self._refuse(raw, f"{top}/ belongs to the harness and is never writable")

    def _check_links(self, raw: object, rel: PurePosixPath) -> Path:
        cur = self.root
        for part in rel.parts:
            cur = cur / part
            if cur.is_symlink():
                raise self._refuse(raw, f"{cur.relative_to(self.root)} is a symlink")
        resolved = (self.root / Path(*rel.parts)).resolve()
        try:
            resolved.relative_to(self.root)
        except ValueError:
            raise self._refuse(raw, f"it resolves to {resolved}, outside the project root") from None
        if resolved.is_dir():
            raise self._refuse(raw, "it names an existing folder, not a file")
        return resolved

    def check(self, rel_path: str | os.PathLike[str]) -> str | None:
        """Why ``rel_path`` may not be written (one sentence), or None when it may."""
        try:
            self.resolve_for_write(rel_path)
        except PathRefused as exc:
            return str(exc)
        return None

    def resolve_for_write(self, rel_path: str | os.PathLike[str]) -> Path:
        """The absolute path to write, or :class:`PathRefused`."""
        rel = self._lexical(rel_path)
        self._check_allowed(rel_path, rel)
        return self._check_links(rel_path, rel)

    # ---- writing -----------------------------------------------------------------------------
    def write_text(self, rel_path: str | os.PathLike[str], text: str) -> Path:
        """Check ``rel_path`` and write ``text`` to it atomically; returns the path written."""
        from ..fsutil import atomic_write_text

        target = self.resolve_for_write(rel_path)
        # create missing folders one by one, re-checking that none of them became a link
        rel = target.relative_to(self.root)
        cur = self.root
        for part in rel.parts[:-1]:
            cur = cur / part
            if cur.is_symlink():
                raise self._refuse(rel_path, f"{cur.relative_to(self.root)} is a symlink")
            cur.mkdir(exist_ok=True)
        atomic_write_text(target, text)
        return target
