"""The package's import graph has no cycle: every import counts (module level, inside a function, under
``TYPE_CHECKING``), because a lazy import only hides a cycle until someone moves it to the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_kforge

PKG_DIR = Path(pytest_kforge.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for f in PKG_DIR.rglob("*.py"):
        parts = ["pytest_kforge", *f.relative_to(PKG_DIR).with_suffix("").parts]
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return out


def _imports(mod: str, path: Path, is_pkg: bool, known: set[str]) -> set[str]:
    """The package modules ``mod`` imports (``from x import y`` counts x, and x.y when y is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = mod.split(".") if is_pkg else mod.split(".")[:-1]
            if node.level:
                base = base[:len(base) - node.level + 1]
                src = ".".join([*base, *([node.module] if node.module else [])])
            else:
                src = node.module or ""
            names = [src, *(f"{src}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found.update(n for n in names if n in known and n != mod)
    return found


def import_cycles() -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    mods = _modules()
    edges = {m: _imports(m, f, p, set(mods)) for m, (f, p) in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def test_package_has_no_import_cycle() -> None:
    assert import_cycles() == [], "move the shared names into a module both sides import"


def test_the_graph_sees_lazy_and_type_checking_imports(tmp_path, monkeypatch) -> None:
    """The check would have caught the two cycles it replaced (a lazy import, a TYPE_CHECKING one)."""
    pkg = tmp_path / "pytest_kforge"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import X\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nX = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..a import f\n")
    monkeypatch.setattr(f"{__name__}.PKG_DIR", pkg)
    assert import_cycles() == [["pytest_kforge.a", "pytest_kforge.b"]]
