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
import keyword
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import KforgeError
from .exportgraph import FORBIDDEN, ExportError, check, collect, places, rewrite, shown

__all__ = ["ExportError", "Exported", "FORBIDDEN", "export", "main"]

_SLOT = re.compile(r"\{\{(\w+)\}\}")


@dataclasses.dataclass(frozen=True)
class Exported:
    """What :func:`export` wrote: the package folder, the kernel modules copied, the other files (templates,
    ``__init__.py`` files), by path inside the package, and the third-party modules it imports."""

    package: str
    root: Path
    modules: tuple[str, ...]
    others: tuple[str, ...]
    third_party: tuple[str, ...]


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
            any(not p.is_relative_to(target.resolve()) for p in places(package)):  # an installed module's name
        raise ExportError(f"package name {package!r} is not a free Python identifier (a keyword, a reserved name or an "
                          f"installed module); pass another with --name.")
    bases = [Path(p) for p in package_path(k.path)]
    root = kdir.resolve().parent
    files = collect(kernel, version, bases, what, package, root)
    out = {rel: rewrite(f.source.read_text(encoding="utf-8"), f, kernel, what) for rel, f in files.items()}
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
    values["third_party"] = repr(check(out, package, why, root, what))
    written = dict(out)
    for p in sorted(q for q in tdir.rglob("*") if q.is_file() and "__pycache__" not in q.parts):
        rel = _fill(p.relative_to(tdir).as_posix().removesuffix(".tmpl"), values, str(p))
        if rel in out:
            raise ExportError(f"template {p} would overwrite the kernel module {rel}; rename the template.")
        written[rel], why[rel] = _fill(p.read_text(encoding="utf-8"), values, str(p)), f"template {shown(p, root)}"
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
    third = check(written, package, why, root, what)
    if package in third:
        raise ExportError(f"package name {package!r} is also imported as a third-party module; pass another --name.")
    _write(target, written, force)
    return Exported(package, target, tuple(sorted(out)), tuple(sorted(set(written) - set(out))), third)


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
