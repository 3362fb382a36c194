"""Export a kernel version as a self-contained package a serving engine can vendor.

Usage::

    python -m pytest_kforge.export KERNEL VERSION DIR [--name PACKAGE] [--kernels-dir DIR] [--templates DIR] [--force]

writes ``DIR/PACKAGE/`` (``PACKAGE`` defaults to ``<kernel>_<version>``):

* the version module and every module of its kernel folder it imports, transitively: every import statement
  of the AST counts, lazy ones inside functions too, in each form the code uses (``from kforge_kernels.<kernel>.a
  import b``, ``from kforge_kernels.<kernel>.a import b as c``, ``import kforge_kernels.<kernel>.a as b``,
  ``from . import b``).  Each lands where the registry's package ``kforge_kernels.<kernel>`` has it (a version in
  ``versions/`` at the top), byte-identical but for its ``kforge_kernels.<kernel>`` imports, rewritten as relative
  ones in place (the AST locates them); a sub-folder without an ``__init__.py`` gets an empty one;
* the kernel's export templates, every file under ``kernels/<kernel>/export/`` (or ``--templates DIR``): the
  kernel's one-function API, its README, its test.  ``{{name}}`` placeholders are filled in (``package``,
  ``kernel``, ``version``, ``language``, ``description``, ``modules``, ``third_party``, ``trials``,
  ``tolerances``, ``measured``) and a ``.tmpl`` suffix is dropped; a kernel without templates gets an
  ``__init__.py`` that re-exports the version's ``run``.

Nothing is written when the result would not stand alone: a file of the package that imports ``pytest_kforge``,
``kforge_kernels`` (another kernel's folder), ``kernels``, ``benchmarks``, or a module of this project outside the
package (anything that is neither the standard library nor installed third-party code) stops the export with one
sentence naming the file, the line and what to do.  The core knows no kernel: what is kernel-specific comes from
its templates.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import keyword
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import KforgeError

__all__ = ["ExportError", "Exported", "FORBIDDEN", "export", "main"]

#: top-level modules an exported package may never import: the harness, the registry's synthetic package, the
#: project's kernel folders and benchmarks
FORBIDDEN = ("pytest_kforge", "kforge_kernels", "kernels", "benchmarks")
_PKG = "kforge_kernels"
_SLOT = re.compile(r"\{\{(\w+)\}\}")
_FROM = re.compile(r"from\s+([A-Za-z_][\w.]*)(\s+import\b)")


class ExportError(KforgeError, ValueError):
    """The export cannot be written (the message is one sentence saying what to do)."""


@dataclasses.dataclass(frozen=True)
class Exported:
    """What :func:`export` wrote: the package folder, the kernel modules copied, the other files (templates,
    ``__init__.py`` files), by path inside the package, and the third-party modules it imports."""

    package: str
    root: Path
    modules: tuple[str, ...]
    others: tuple[str, ...]
    third_party: tuple[str, ...]


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


def _locate(bases: Sequence[Path], parts: tuple[str, ...]) -> tuple[Path, bool] | None:
    """The file of module ``parts`` under the kernel package's ``bases`` and whether it is a package's ``__init__``."""
    for base in bases:
        stem = base.joinpath(*parts)
        if parts and stem.with_suffix(".py").is_file():
            return stem.with_suffix(".py"), False
        if (stem / "__init__.py").is_file():
            return stem / "__init__.py", True
    return None


def _is_dir(bases: Sequence[Path], parts: tuple[str, ...]) -> bool:
    return any(base.joinpath(*parts).is_dir() for base in bases)


def _kernel_parts(name: str, kernel: str) -> tuple[str, ...] | None:
    """``name``'s parts inside ``kforge_kernels.<kernel>``, or None when it names no module of that kernel."""
    parts = tuple(name.split("."))
    return parts[2:] if parts[:2] == (_PKG, kernel) else None


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))),
                  key=lambda n: (n.lineno, n.col_offset))


def _fail(what: str, f: _File | str, node: ast.stmt, target: str, todo: str) -> ExportError:
    where = f if isinstance(f, str) else f"{f.package}/{f.rel} ({f.why})"
    return ExportError(f"cannot export {what}: {where} imports {target} at line {node.lineno}; {todo}.")


def _collect(kernel: str, version: str, bases: Sequence[Path], what: str, package: str, root: Path) -> dict[str, _File]:
    """The version module and the modules of its kernel folder it imports, transitively, by package path."""
    found = _locate(bases, (version,))
    if found is None:
        raise ExportError(f"cannot export {what}: no file for module {_PKG}.{kernel}.{version}; pass a version the "
                          f"registry lists.")
    first = _File((version,), False, found[0], f"{_shown(found[0], root)}, the version", package)
    files: dict[str, _File] = {first.rel: first}
    todo = [first]
    while todo:
        f = todo.pop()
        for node in _imports(ast.parse(f.source.read_text(encoding="utf-8"), str(f.source))):
            for parts in _kernel_targets(node, f, kernel, bases, what):
                hit = _locate(bases, parts)
                if hit is None:
                    continue  # a sub-folder without __init__.py, or a name imported from a module
                dep = _File(parts, hit[1], hit[0], f"{_shown(hit[0], root)}, imported by {'.'.join(f.parts) or kernel}",
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
                raise _fail(what, f, node, mod, f"import modules of kernels/{kernel}/ only, by their full name")
            base = kp
        if _locate(bases, base) is None and not _is_dir(bases, base):
            raise _fail(what, f, node, ".".join((_PKG, kernel) + base), f"no such module in kernels/{kernel}/")
        return [base] + [base + (a.name,) for a in node.names if a.name != "*"]
    out: list[tuple[str, ...]] = []
    for a in node.names:
        if a.name.split(".")[0] != _PKG:
            continue
        kp = _kernel_parts(a.name, kernel)
        if kp is None or not kp or (_locate(bases, kp) is None and not _is_dir(bases, kp)):
            raise _fail(what, f, node, a.name, f"import modules of kernels/{kernel}/ only")
        out.append(kp)
    return out


def _relative(target: tuple[str, ...], here: tuple[str, ...]) -> str:
    """The relative ``from`` part naming package-relative module ``target`` inside package ``here``."""
    common = 0
    while common < min(len(target), len(here)) and target[common] == here[common]:
        common += 1
    return "." * (len(here) - common + 1) + ".".join(target[common:])


def _rewrite(text: str, f: _File, kernel: str, what: str) -> str:
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
            rel = _relative(kp, f.package_parts)
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
                    rel = _relative(kp[:-1], f.package_parts)
                    stmts.append(f"from {rel} import {kp[-1]} as {a.asname}")
            assert node.end_lineno is not None and node.end_col_offset is not None
            edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, "; ".join(stmts)))
    raw = [ln.encode("utf-8") for ln in lines]
    for lno, col, elno, ecol, new in sorted(edits, reverse=True):
        head, tail = raw[lno - 1][:col], raw[elno - 1][ecol:]
        raw[lno - 1:elno] = [head + new.encode("utf-8") + tail]
    return b"".join(raw).decode("utf-8")


def _places(top: str) -> list[Path]:
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
    return any(p.is_relative_to(root) and not {"site-packages", "dist-packages"} & set(p.parts) for p in _places(top))


def _check(files: Mapping[str, str], package: str, why: Mapping[str, str], root: Path, what: str) -> tuple[str, ...]:
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


def _measured(root: Path, kernel: str, version: str) -> str:
    """Markdown lines of ``version``'s figures in the kernel's best record, or a line saying there are none."""
    from .best import best_path, load_best

    path = best_path(root, kernel)
    rel = path.relative_to(root).as_posix()
    if not path.is_file():
        return f"Not measured: the project has no `{rel}`."
    rec = load_best(path)
    row = next((r for r in rec.rows if r.get("version") == version), None)
    if row is None:
        return f"Not measured: `{rel}` has no row for {version}."
    out = [f"From `{rel}` ({rec.gpu or 'GPU not recorded'}, {rec.date or 'undated'}; overall best there: {rec.best}; "
           f"rule: {rec.criterion}):", "", "| trial | shape | median (us) | TFLOP/s | % of floor |", "|---|---|---|---|---|"]
    for trial, c in row.get("trials", {}).items():
        cells = [format(c[k], f) if isinstance(c.get(k), (int, float)) else "-"
                 for k, f in (("median_us", ".1f"), ("tflops", ".0f"), ("pct_floor", ".1f"))]
        out.append(f"| {trial} | {c.get('id', '')} | {' | '.join(cells)} |")
    return "\n".join(out)


def _fill(text: str, values: Mapping[str, str], where: str) -> str:
    missing = sorted({m.group(1) for m in _SLOT.finditer(text)} - set(values))
    if missing:
        raise ExportError(f"template {where} has unknown placeholder(s) {', '.join(missing)}; use only "
                          f"{', '.join(sorted(values))}.")
    return _SLOT.sub(lambda m: values[m.group(1)], text)


def _version_constants(path: Path) -> dict[str, Any]:
    """The literal module-level LANGUAGE / DESCRIPTION of a version file (read, not imported)."""
    out: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError):
                pass
    return out


def export(kernel: str, version: str, dest: str | Path, *, name: str | None = None,
           kernels_dir: str | Path | None = None, templates: str | Path | None = None,
           force: bool = False) -> Exported:
    """Write ``dest/<name>/`` (see the module docstring) and return what was written."""
    from .registry import Registry, default_kernels_dir, package_path

    kdir = Path(kernels_dir) if kernels_dir is not None else default_kernels_dir()
    reg = Registry(kdir)
    if kernel not in reg.kernel_names():
        raise ExportError(f"unknown kernel {kernel!r}: {reg.root} has {', '.join(reg.kernel_names()) or 'none'}; pass "
                          f"one of those (or the project's folder with --kernels-dir).")
    k = reg.kernel(kernel)
    if version not in k.version_names():
        raise ExportError(f"kernel {kernel!r} has no version {version!r}; pass one of {', '.join(k.version_names())}.")
    package = name or f"{kernel}_{version}"
    what = f"{kernel} {version}"
    target = Path(dest) / package
    if not package.isidentifier() or keyword.iskeyword(package) or package in FORBIDDEN or \
            package in sys.stdlib_module_names or \
            any(not p.is_relative_to(target.resolve()) for p in _places(package)):  # an installed module's name
        raise ExportError(f"package name {package!r} is not a free Python identifier (a keyword, a reserved name or an "
                          f"installed module); pass another with --name.")
    bases = [Path(p) for p in package_path(k.path)]
    root = kdir.resolve().parent
    files = _collect(kernel, version, bases, what, package, root)
    out = {rel: _rewrite(f.source.read_text(encoding="utf-8"), f, kernel, what) for rel, f in files.items()}
    why = {rel: f.why for rel, f in files.items()}
    tdir = (Path(templates) if templates is not None else k.path / "export").resolve()
    if templates is not None and not tdir.is_dir():
        raise ExportError(f"template folder {tdir} does not exist; pass the folder holding {kernel}'s export templates.")
    consts = _version_constants(files[f"{version}.py"].source)
    spec = k.spec
    values = {
        "package": package, "kernel": kernel, "version": version, "language": str(consts.get("LANGUAGE", "")),
        "description": str(consts.get("DESCRIPTION", "")), "modules": "\n".join(f"- `{r}`" for r in sorted(out)),
        "trials": repr({t: dict(spec.trials[t]) for t in spec.default_trials}),
        "tolerances": repr({n: (t.max_abs, t.rel_l2, t.rel_elem) for n, t in spec.tolerances.items()}),
        "measured": _measured(root, kernel, version),
    }
    # third-party modules the kernel modules import, for the templates' requirement lists
    values["third_party"] = repr(_check(out, package, why, root, what))
    written = dict(out)
    for p in sorted(q for q in tdir.rglob("*") if q.is_file() and "__pycache__" not in q.parts):
        rel = _fill(p.relative_to(tdir).as_posix().removesuffix(".tmpl"), values, str(p))
        if rel in out:
            raise ExportError(f"template {p} would overwrite the kernel module {rel}; rename the template.")
        written[rel], why[rel] = _fill(p.read_text(encoding="utf-8"), values, str(p)), f"template {_shown(p, root)}"
    if "__init__.py" not in written:
        written["__init__.py"] = (f'"""{package}: {kernel} {version} exported by pytest_kforge.export (no {kernel} '
                                  f'export templates: the API is the version\'s own run)."""\n\nfrom .{version} import '
                                  f"run as run\n")
        why["__init__.py"] = "generated"
    for rel in list(written):  # every folder a package
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            init = "/".join(parts[:i]) + "/__init__.py"
            if init not in written:
                written[init], why[init] = "", "generated"
    third = _check(written, package, why, root, what)
    if package in third:
        raise ExportError(f"package name {package!r} is also imported as a third-party module; pass another --name.")
    _write(target, written, force)
    return Exported(package, target, tuple(sorted(out)), tuple(sorted(set(written) - set(out))), third)


def _shown(path: Path, root: Path) -> str:
    path = path.resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _write(target: Path, files: Mapping[str, str], force: bool) -> None:
    """Write ``files`` under ``target`` all at once: into a sibling folder, then renamed (nothing half-written)."""
    if target.exists() and not force:
        raise ExportError(f"{target} already exists; pass --force to replace it or pick another DIR.")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for rel, text in files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.export",
                                 description="Export a kernel version as a self-contained package.")
    ap.add_argument("kernel")
    ap.add_argument("version")
    ap.add_argument("dest", help="folder to write the package into")
    ap.add_argument("--name", help="package name (default <kernel>_<version>)")
    ap.add_argument("--kernels-dir", help="the project's kernels folder (default: found from the working directory)")
    ap.add_argument("--templates", help="export templates (default kernels/<kernel>/export/)")
    ap.add_argument("--force", action="store_true", help="replace DEST/PACKAGE if it exists")
    args = ap.parse_args(argv)
    try:
        done = export(args.kernel, args.version, args.dest, name=args.name, kernels_dir=args.kernels_dir,
                      templates=args.templates, force=args.force)
    except (KforgeError, OSError) as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {done.root}: {len(done.modules)} kernel modules, {len(done.others)} other files; "
          f"needs {', '.join(done.third_party) or 'nothing beyond the standard library'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
