"""A kernel's version tree, and what changed between two versions, in one command::

    python -m pytest_kforge.lineage mla              # every version: parent, DSL, best decode/spec, kept, description
    python -m pytest_kforge.lineage mla v59_cute     # its ancestry from v0, and the versions built on it
    python -m pytest_kforge.lineage mla --diff v35_cute v59_cute   # CONFIG, FEATURES, modules and code

Versions are read from their files (AST), so no DSL toolchain is needed; a ``CONFIG`` that is not a literal is
read from the imported module when it imports here.  Measured figures come from :func:`measured` only.
"kept" is the loop's verdict read from those figures: the version beat its parent (the geometric mean of its decode
and spec figures is lower); "best" marks the version the kernel's best record names
(``docs/kernels/<kernel>/best.json``, the one source the orchestrator and the READMEs read), or, with no record,
the lowest geometric mean of all.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import gzip
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import artifacts
from .registry import (
    VERSION_RE,
    default_kernels_dir,
    module_file,
    version_path,
    version_sort_key,
    versions_dir,
)

__all__ = ["Measure", "Node", "main", "measured", "nodes", "render_diff", "render_tree", "verdicts"]

TRIALS = ("decode", "spec")


@dataclasses.dataclass(frozen=True)
class Measure:
    """A trial's best (lowest) correct harness median and the run folder it came from."""

    us: float
    run: str


@dataclasses.dataclass
class Node:
    name: str
    parent: str | None
    language: str
    description: str
    path: Path


def measured(root: Path, kernel: str, *, gpu: str = "H200") -> dict[str, dict[str, Measure]]:
    """{version: {trial: Measure}} over every suite results JSON of ``kernel`` under ``docs/kernels/runs``
    (loose or archived) measured on a GPU whose name contains ``gpu``.

    The one place lineage reads measurements from: switch it to the computed best (issue 38) here.
    """
    out: dict[str, dict[str, Measure]] = {}
    for path in artifacts.glob(root / "docs" / "kernels" / "runs", "**/suite*.json.gz"):
        try:
            data = json.loads(gzip.decompress(artifacts.read_bytes(path)))
        except (OSError, ValueError, EOFError):
            continue
        if not isinstance(data, dict) or data.get("kernel", kernel) != kernel or gpu not in str(data.get("gpu", "")):
            continue
        run = path.relative_to(root / "docs" / "kernels" / "runs").parts[0]
        for r in data.get("results") or []:
            us = r.get("median_us")
            if not r.get("correct") or r.get("error") or not isinstance(us, (int, float)) or r.get("trial") not in TRIALS:
                continue
            best = out.setdefault(r["version"], {}).get(r["trial"])
            if best is None or us < best.us:
                out[r["version"]][r["trial"]] = Measure(float(us), run)
    return out


def _literal(tree: ast.Module, name: str) -> Any:
    """The value assigned to ``name`` at module level: a literal, else its source text (None when unassigned)."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError):
                return ast.unparse(value)
    return None


def nodes(kernel_dir: Path) -> dict[str, Node]:
    """Every version of the kernel in ``kernel_dir``, read from its file."""
    out = {}
    for p in sorted(versions_dir(kernel_dir).glob("v*.py"), key=lambda p: version_sort_key(p.stem)):
        if not VERSION_RE.match(p.stem):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        out[p.stem] = Node(p.stem, _literal(tree, "PARENT"), str(_literal(tree, "LANGUAGE") or "?"),
                           str(_literal(tree, "DESCRIPTION") or ""), p)
    return out


def ancestry(tree: Mapping[str, Node], name: str) -> list[str]:
    """``name`` and its ancestors, root first (stops at a missing parent or a cycle)."""
    chain: list[str] = []
    while name in tree and name not in chain:
        chain.append(name)
        name = tree[name].parent or ""
    return chain[::-1]


def _score(m: Mapping[str, Measure]) -> float | None:
    """Geometric mean of the trial figures (None unless every trial was measured)."""
    if not all(t in m for t in TRIALS):
        return None
    prod = 1.0
    for t in TRIALS:
        prod *= m[t].us
    return prod ** (1 / len(TRIALS))


def verdicts(tree: Mapping[str, Node], meas: Mapping[str, Mapping[str, Measure]],
             best: str | None = None) -> dict[str, str]:
    """{version: "best" | "yes" | "no" | "root" | "-"}: kept when it beat its parent (see the module docstring).

    ``best`` is the best record's version when there is one; without it the lowest geometric mean is marked.
    """
    scores = {n: _score(meas.get(n, {})) for n in tree}
    ranked = sorted((s, n) for n, s in scores.items() if s is not None)
    out = {}
    for n, node in tree.items():
        mine, theirs = scores[n], scores.get(node.parent or "")
        out[n] = ("root" if node.parent is None else "-" if mine is None or theirs is None
                  else "yes" if mine < theirs else "no")
    if best in out:
        out[best] = "best"
    elif ranked:
        out[ranked[0][1]] = "best"
    return out


def _fig(m: Mapping[str, Measure], trial: str) -> str:
    return f"{m[trial].us:.1f}" if trial in m else "-"


def render_tree(tree: Mapping[str, Node], meas: Mapping[str, Mapping[str, Measure]], kept: Mapping[str, str],
                only: Sequence[str] | None = None) -> str:
    """One line per version (``only``: those, in that order): depth-marked name, parent, DSL, figures, kept."""
    names = list(only) if only is not None else list(tree)
    width = max((len(n) for n in names), default=7) + 2
    lines = [f"{'version':<{width}} {'parent':<10} {'DSL':<10} {'decode us':>9} {'spec us':>9}  kept  description"]
    for n in names:
        node, m = tree[n], meas.get(n, {})
        lines.append(f"{n:<{width}} {node.parent or '-':<10} {node.language:<10} {_fig(m, 'decode'):>9} "
                     f"{_fig(m, 'spec'):>9}  {kept.get(n, '-'):<4}  {node.description}")
    return "\n".join(lines)


def _config(node: Node, kernels_dir: Path, kernel: str) -> tuple[dict[str, Any] | None, str]:
    """The version's CONFIG (a literal, else from the imported module) and where it came from."""
    value = _literal(ast.parse(node.path.read_text(encoding="utf-8")), "CONFIG")
    if isinstance(value, dict):
        return value, "literal"
    try:
        from .registry import load_version

        return dict(load_version(kernel, node.name, kernels_dir=kernels_dir).config), "imported"
    except Exception as exc:  # noqa: BLE001 - e.g. a DSL that is not installed here
        return None, f"not a literal ({value}) and the module does not import here: {type(exc).__name__}"


def _imports(path: Path, kernels_dir: Path, kernel: str) -> set[str]:
    """The kernel-folder modules the file imports, as paths relative to the kernel folder."""
    found = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else []
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            names = [n.module] + [f"{n.module}.{a.name}" for a in n.names]
        for name in names:
            f = module_file(kernels_dir, name)
            if f is not None and name.split(".")[1] == kernel:
                found.add(f.relative_to(kernels_dir / kernel).as_posix())
    return found


def _code(path: Path) -> list[str]:
    """The module's source without its docstring (the code a diff should show)."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        text = "\n".join(text.splitlines()[first.end_lineno or 0:])
    return text.strip("\n").splitlines()


def _dict_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            out.append(f"  - {k} = {a[k]!r}")
        elif k not in a:
            out.append(f"  + {k} = {b[k]!r}")
        elif a[k] != b[k]:
            out.append(f"  ~ {k}: {a[k]!r} -> {b[k]!r}")
    return out or ["  (same)"]


def render_diff(tree: Mapping[str, Node], kernels_dir: Path, kernel: str, a: str, b: str, *,
                max_lines: int = 120) -> str:
    """What changed from version ``a`` to ``b``: relation, CONFIG, FEATURES, kernel modules, code."""
    na, nb = tree[a], tree[b]
    chain_b, chain_a = ancestry(tree, b), ancestry(tree, a)
    if a in chain_b:
        rel = f"{b} descends from {a}: " + " -> ".join(chain_b[chain_b.index(a):])
    elif b in chain_a:
        rel = f"{a} descends from {b}: " + " -> ".join(chain_a[chain_a.index(b):])
    else:
        common = [v for v in chain_a if v in chain_b]
        rel = f"siblings; last common ancestor {common[-1] if common else 'none'}"
    lines = [f"{a} ({na.language}): {na.description}", f"{b} ({nb.language}): {nb.description}", rel, "", "CONFIG:"]
    (ca, wa), (cb, wb) = _config(na, kernels_dir, kernel), _config(nb, kernels_dir, kernel)
    lines += _dict_diff(ca, cb) if ca is not None and cb is not None else [f"  {a}: {wa}; {b}: {wb}"]
    fa = _literal(ast.parse(na.path.read_text(encoding="utf-8")), "FEATURES")
    fb = _literal(ast.parse(nb.path.read_text(encoding="utf-8")), "FEATURES")
    lines += ["FEATURES (as written):", f"  {a}: {fa}" if fa != fb else "  (same)"] + ([f"  {b}: {fb}"] if fa != fb else [])
    ma, mb = _imports(na.path, kernels_dir, kernel), _imports(nb.path, kernels_dir, kernel)
    lines += ["kernel modules imported:"] + [f"  - {m}" for m in sorted(ma - mb)] + [f"  + {m}" for m in sorted(mb - ma)]
    lines += [f"  = {m}" for m in sorted(ma & mb)] or ["  (none)"]
    diff = list(difflib.unified_diff(_code(na.path), _code(nb.path), f"{a}.py", f"{b}.py", lineterm="", n=1))
    lines += ["code (docstrings left out):"] + (diff[:max_lines] or ["  (same)"])
    if len(diff) > max_lines:
        lines.append(f"... {len(diff) - max_lines} more diff lines (--max-lines N shows more)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.lineage", description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", help="a kernel folder under kernels/, e.g. mla")
    ap.add_argument("version", nargs="?", help="show this version's ancestry and the versions built on it")
    ap.add_argument("--diff", nargs=2, metavar=("A", "B"), help="what changed from version A to version B")
    ap.add_argument("--kernels-dir", type=Path, default=None, help="default: kernels/ of the project")
    ap.add_argument("--gpu", default="H200", help="measured figures from runs on this GPU (default H200)")
    ap.add_argument("--max-lines", type=int, default=120, help="code diff lines shown by --diff")
    args = ap.parse_args(argv)
    kdir = (args.kernels_dir or default_kernels_dir()).resolve()
    if not (kdir / args.kernel / "spec.py").is_file():
        ap.error(f"no kernels/{args.kernel}/spec.py under {kdir}; give a kernel folder name such as mla")
    tree = nodes(kdir / args.kernel)
    for v in [args.version] * bool(args.version) + list(args.diff or []):
        if v not in tree:
            ap.error(f"{v} is not a version of {args.kernel} (no {version_path(kdir / args.kernel, v)}); "
                     f"run `python -m pytest_kforge.lineage {args.kernel}` for the list")
    if args.diff:
        print(render_diff(tree, kdir, args.kernel, *args.diff, max_lines=args.max_lines))
        return 0
    root = kdir.parent
    meas = measured(root, args.kernel, gpu=args.gpu)
    from pytest_kforge.best import best_path, best_version

    kept = verdicts(tree, meas, best_version(best_path(root, args.kernel), list(tree)))
    only = None
    if args.version:
        children = [n for n, node in tree.items() if node.parent == args.version]
        only = ancestry(tree, args.version) + children
        print(f"{args.version}: ancestry from the root, then the versions built on it ({len(children)})")
    print(render_tree(tree, meas, kept, only))
    if meas:
        runs = sorted({m.run for per in meas.values() for m in per.values()})
        print(f"\nfigures: lowest correct harness median on {args.gpu} over {len(runs)} run folders under "
              "docs/kernels/runs; kept: beat its parent (geometric mean of decode and spec); best: "
              f"docs/kernels/{args.kernel}/best.json when present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
