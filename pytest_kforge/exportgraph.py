"""The module graph of an export (:mod:`pytest_kforge.export`): which files of a kernel folder a version reaches
through its imports, each file's ``kforge_kernels.<kernel>`` imports rewritten as relative ones, and the check that
the written package stands alone (no harness, no other kernel, no project module outside it).

The shared helper folder ``kernels/_shared/`` (``kforge_kernels._shared``) is vendored too: a module of it that the
version reaches lands at ``_shared/<module>.py`` inside the package, and its importers get a relative import."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import KforgeError

__all__ = ["ExportError", "FORBIDDEN", "collect", "rewrite", "check", "relative", "places", "shown"]

#: top-level modules an exported package may never import: the harness, the registry's synthetic package, the
#: project's kernel folders and benchmarks
FORBIDDEN = ("pytest_kforge", "kforge_kernels", "kernels", "benchmarks")
_PKG = "kforge_kernels"
SHARED = "_shared"  # kernels/_shared: host helpers every kernel's versions may import
_FROM = re.compile(r"from\s+([A-Za-z_][\w.]*)(\s+import\b)")


class ExportError(KforgeError, ValueError):
    """The export cannot be written (the message is one sentence saying what to do)."""


@dataclasses.dataclass
class _File:
    parts: tuple[str, ...]  # the module, relative to kforge_kernels.<kernel> (a package's own parts too)
    is_pkg: bool
    source: Path
    why: str  # where it comes from and how the version reaches it, for error messages
    package: str

    @property
    def rel(self) -> str:
        return "/".join(self.parts) + "/__init__.py" if self.is_pkg else "/".join(self.parts) + ".py"

    @property
    def package_parts(self) -> tuple[str, ...]:
        return self.parts if self.is_pkg else self.parts[:-1]


def _where(bases: Sequence[Path], parts: tuple[str, ...]) -> Sequence[Path]:
    """Where module ``parts`` lives: the kernels folder for ``_shared`` modules, else the kernel package's bases."""
    return [bases[0].parent] if parts[:1] == (SHARED,) and bases else bases


def _locate(bases: Sequence[Path], parts: tuple[str, ...]) -> tuple[Path, bool] | None:
    """The file of module ``parts`` under the kernel package's ``bases`` and whether it is a package's ``__init__``."""
    for base in _where(bases, parts):
        stem = base.joinpath(*parts)
        if parts and stem.with_suffix(".py").is_file():
            return stem.with_suffix(".py"), False
        if (stem / "__init__.py").is_file():
            return stem / "__init__.py", True
    return None


def _is_dir(bases: Sequence[Path], parts: tuple[str, ...]) -> bool:
    return any(base.joinpath(*parts).is_dir() for base in _where(bases, parts))


def _kernel_parts(name: str, kernel: str) -> tuple[str, ...] | None:
    """``name``'s parts inside ``kforge_kernels.<kernel>`` (``("_shared", ...)`` for ``kforge_kernels._shared``), or
    None when it names no module of that kernel or the shared folder."""
    parts = tuple(name.split("."))
    if parts[:2] == (_PKG, SHARED):
        return parts[1:]
    return parts[2:] if parts[:2] == (_PKG, kernel) else None


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))),
                  key=lambda n: (n.lineno, n.col_offset))


def _fail(what: str, f: _File | str, node: ast.stmt, target: str, todo: str) -> ExportError:
    where = f if isinstance(f, str) else f"{f.package}/{f.rel} ({f.why})"
    return ExportError(f"cannot export {what}: {where} imports {target} at line {node.lineno}; {todo}.")


def collect(kernel: str, version: str, bases: Sequence[Path], what: str, package: str, root: Path) -> dict[str, _File]:
    """The version module and the modules of its kernel folder it imports, transitively, by package path."""
    found = _locate(bases, (version,))
    if found is None:
        raise ExportError(f"cannot export {what}: no file for module {_PKG}.{kernel}.{version}; pass a version the "
                          f"registry lists.")
    first = _File((version,), False, found[0], f"{shown(found[0], root)}, the version", package)
    files: dict[str, _File] = {first.rel: first}
    todo = [first]
    while todo:
        f = todo.pop()
        for node in _imports(ast.parse(f.source.read_text(encoding="utf-8"), str(f.source))):
            for parts in _kernel_targets(node, f, kernel, bases, what):
                hit = _locate(bases, parts)
                if hit is None:
                    continue  # a sub-folder without __init__.py, or a name imported from a module
                dep = _File(parts, hit[1], hit[0], f"{shown(hit[0], root)}, imported by {'.'.join(f.parts) or kernel}",
                            package)
                if dep.rel not in files:
                    files[dep.rel] = dep
                    todo.append(dep)
    return files


def _kernel_targets(node: ast.Import | ast.ImportFrom, f: _File, kernel: str, bases: Sequence[Path],
                    what: str) -> list[tuple[str, ...]]:
    """The kernel-folder modules ``node`` may load (a name imported from a package may be a module)."""
    here = f.package_parts
    if isinstance(node, ast.ImportFrom):
        if node.level:
            if node.level - 1 > len(here):
                raise _fail(what, f, node, "a module above its kernel folder", "import only modules of the folder")
            base = here[:len(here) - node.level + 1] + (tuple(node.module.split(".")) if node.module else ())
        else:
            mod = node.module or ""
            if mod.split(".")[0] != _PKG:
                return []
            kp = _kernel_parts(mod, kernel)
            if kp is None:
                raise _fail(what, f, node, mod, f"import modules of kernels/{kernel}/ or kernels/{SHARED}/ only, by "
                            f"their full name")
            base = kp
        if _locate(bases, base) is None and not _is_dir(bases, base):
            raise _fail(what, f, node, ".".join(((_PKG,) if base[:1] == (SHARED,) else (_PKG, kernel)) + base),
                        f"no such module in kernels/{kernel}/" if base[:1] != (SHARED,) else "no such shared module")
        return [base] + [base + (a.name,) for a in node.names if a.name != "*"]
    out: list[tuple[str, ...]] = []
    for a in node.names:
        if a.name.split(".")[0] != _PKG:
            continue
        kp = _kernel_parts(a.name, kernel)
        if kp is None or not kp or (_locate(bases, kp) is None and not _is_dir(bases, kp)):
            raise _fail(what, f, node, a.name, f"import modules of kernels/{kernel}/ or kernels/{SHARED}/ only")
        out.append(kp)
    return out


def relative(target: tuple[str, ...], here: tuple[str, ...]) -> str:
    """The relative ``from`` part naming package-relative module ``target`` inside package ``here``."""
    common = 0
    while common < min(len(target), len(here)) and target[common] == here[common]:
        common += 1
    return "." * (len(here) - common + 1) + ".".join(target[common:])


def rewrite(text: str, f: _File, kernel: str, what: str) -> str:
    """``text`` with its absolute ``kforge_kernels.<kernel>`` imports made relative, the rest byte-identical."""
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []  # (line, byte col, end line, end byte col, new text)
    for node in _imports(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            kp = _kernel_parts(node.module or "", kernel) if not node.level else None
            if kp is None:
                continue
            line = lines[node.lineno - 1].encode("utf-8")
            m = _FROM.match(line[node.col_offset:].decode("utf-8"))
            if m is None or m.group(1) != node.module:
                raise _fail(what, f, node, node.module or "", "write it as `from MODULE import NAMES` on one line")
            start = node.col_offset + len(m.group(0)[:m.start(1)].encode("utf-8"))
            rel = relative(kp, f.package_parts)
            edits.append((node.lineno, start, node.lineno, start + len(m.group(1).encode("utf-8")), rel))
        else:
            ours = [a for a in node.names if _kernel_parts(a.name, kernel) is not None]
            if not ours:
                continue
            if any(a.asname is None for a in ours):
                raise _fail(what, f, node, ours[0].name, "a relative import needs `import a.b as c` or `from a import b`")
            stmts = []
            for a in node.names:
                kp = _kernel_parts(a.name, kernel)
                if kp is None:
                    stmts.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else ""))
                else:
                    rel = relative(kp[:-1], f.package_parts)
                    stmts.append(f"from {rel} import {kp[-1]} as {a.asname}")
            assert node.end_lineno is not None and node.end_col_offset is not None
            edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, "; ".join(stmts)))
    raw = [ln.encode("utf-8") for ln in lines]
    for lno, col, elno, ecol, new in sorted(edits, reverse=True):
        head, tail = raw[lno - 1][:col], raw[elno - 1][ecol:]
        raw[lno - 1:elno] = [head + new.encode("utf-8") + tail]
    return b"".join(raw).decode("utf-8")


def places(top: str) -> list[Path]:
    """Where importing top-level module ``top`` here would read it from (none when it is not installed)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    places = [spec.origin] if spec.origin and spec.origin not in ("built-in", "frozen") else []
    return [Path(p).resolve() for p in places + list(spec.submodule_search_locations or [])]


def _project_local(top: str, root: Path) -> bool:
    """Whether ``top`` is code of the project at ``root`` rather than an installed package (or none installed here:
    a requirement of the package's users)."""
    return any(p.is_relative_to(root) and not {"site-packages", "dist-packages"} & set(p.parts) for p in places(top))


def check(files: Mapping[str, str], package: str, why: Mapping[str, str], root: Path, what: str) -> tuple[str, ...]:
    """Fail on any import of a written file that leaves the package for anything but stdlib or third-party code."""
    third: set[str] = set()
    for rel, text in sorted(files.items()):
        if not rel.endswith(".py"):
            continue
        where = f"{package}/{rel} ({why[rel]})"
        try:
            tree = ast.parse(text, rel)
        except SyntaxError as exc:
            raise ExportError(f"cannot export {what}: {where} is not valid Python ({exc.msg}, line {exc.lineno}); "
                              f"fix the template.") from None
        here = tuple(rel.split("/")[:-1])
        for node in _imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                if node.level - 1 > len(here):
                    raise _fail(what, where, node, "a module above the package", "import inside the package only")
                base = here[:len(here) - node.level + 1] + (tuple(node.module.split(".")) if node.module else ())
                # a name imported from a package whose __init__.py is empty must be a module of it
                wanted = [base] + ([base + (a.name,) for a in node.names] if _is_package(files, base, empty=True) else [])
                for mod in wanted:
                    if not _is_package(files, mod) and "/".join(mod) + ".py" not in files:
                        raise _fail(what, where, node, "." * node.level + ".".join(mod[len(here) - node.level + 1:]),
                                    "no such module in the package")
                continue
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for name in names:
                top = name.split(".")[0]
                if top in FORBIDDEN:
                    raise _fail(what, where, node, name, "an exported package must not need the harness or the project"
                                " (make the module import only its kernel folder and third-party packages, or "
                                "export a version that does)")
                if top == package or top == "__future__" or top in sys.stdlib_module_names:
                    continue
                if _project_local(top, root):
                    raise _fail(what, where, node, name, "it is a module of this project outside the package: move "
                                "what it provides into the kernel folder")
                third.add(top)
    return tuple(sorted(third))


def _is_package(files: Mapping[str, str], parts: tuple[str, ...], empty: bool = False) -> bool:
    """Whether ``parts`` is a folder of ``files`` (with ``empty``: one whose ``__init__.py`` is empty or absent)."""
    stem = "/".join(parts)
    init = f"{stem}/__init__.py" if parts else "__init__.py"
    found = not parts or any(k.startswith(stem + "/") for k in files)
    return found and (not empty or not files.get(init, "").strip())


def shown(path: Path, root: Path) -> str:
    path = path.resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

