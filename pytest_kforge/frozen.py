"""Frozen versions, enforced: a committed digest of what each measured version runs, keyed by version id.

A measured version must not change after its numbers were recorded (a fix is a new version).  The record
(``docs/kernels/<kernel>/frozen.json``) holds, per version, one digest per generated kernel:

* ``ptx``: the PTX the DSL generates for each kernel a version's ``prepare`` compiles on the default trial
  shapes (CuTe DSL compiles for sm_90a on a CPU, ``CUTE_DSL_ARCH=sm_90a``).  :func:`normalize_ptx` renames
  the entry symbols to their order of appearance first: the DSL mangles the Python module path into them,
  so moving a file renames them without changing one instruction, and the check must survive a move;
* ``source-ast``: where the DSL cannot compile here (cuTile needs ``tileiras``, which a CPU machine has no
  binary of), the AST of every device function (``@ct.kernel`` / ``@ct.function``) the version's modules
  define (:func:`device_function_digests`): formatting, comments and docstrings do not count, code does.

``compare`` lists what differs in one sentence each; the kernel folder's compile check writes and checks
the record (``kernels/mla/tools/cute_compilecheck.py --frozen check``).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["SCHEMA_VERSION", "FrozenRecord", "normalize_ptx", "digest", "device_function_digests",
           "kernel_folder_modules", "compare", "frozen_path"]

SCHEMA_VERSION = 1
_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", re.M)


def normalize_ptx(ptx: str) -> str:
    """``ptx`` with every ``.entry`` / ``.func`` symbol (and its ``_param_N`` names) renamed ``__kforge_sym<i>``
    in order of appearance, and the compiler's comment header dropped; the instructions are left as they are."""
    names = list(dict.fromkeys(_ENTRY.findall(ptx)))
    text = "\n".join(line for line in ptx.splitlines() if not line.startswith("//"))
    for i, name in sorted(enumerate(names), key=lambda p: -len(p[1])):  # longest first: no name is cut short
        text = re.sub(re.escape(name) + r"(?![\w$])|" + re.escape(name) + r"(?=_param_\d)", f"__kforge_sym{i}", text)
    return text


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _device_decorated(fn: ast.FunctionDef | ast.AsyncFunctionDef, names: tuple[str, ...]) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr in names:
            return True
    return False


def _strip_docstring(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        fn.body = body[1:] or [ast.Pass()]
    return fn


def device_function_digests(modules: Iterable[ModuleType], decorators: tuple[str, ...] = ("kernel", "function"),
                            ) -> dict[str, str]:
    """``{function name: digest of its AST}`` for the functions decorated ``@<x>.kernel`` / ``@<x>.function`` in
    the source of ``modules`` (nested ones included); a name defined twice gets both digests, joined."""
    found: dict[str, list[str]] = {}
    for mod in modules:
        path = getattr(mod, "__file__", None)
        if not path:
            continue
        for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _device_decorated(node, decorators):
                found.setdefault(node.name, []).append(digest(ast.dump(_strip_docstring(node))))
    return {name: "+".join(sorted(ds)) for name, ds in sorted(found.items())}


def kernel_folder_modules(module: ModuleType, package_prefix: str) -> list[ModuleType]:
    """``module`` and the modules of the same kernel folder it imports (its globals under ``package_prefix``)."""
    seen = {module.__name__: module}
    for value in vars(module).values():
        owner = value if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        if isinstance(owner, str):
            import sys

            owner = sys.modules.get(owner)
        if isinstance(owner, ModuleType) and owner.__name__.startswith(package_prefix):
            seen.setdefault(owner.__name__, owner)
    return list(seen.values())


@dataclasses.dataclass
class FrozenRecord:
    """``versions``: version id -> ``{"kind": "ptx" | "source-ast", "kernels": {label: digest}}``."""

    kernel: str
    versions: dict[str, dict[str, Any]]
    #: what produced the digests (arch, DSL versions): a check under another toolchain says so instead
    toolchain: dict[str, str] = dataclasses.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, "kernel": self.kernel, "toolchain": self.toolchain,
                "versions": {v: self.versions[v] for v in sorted(self.versions, key=_version_key)}}

    @classmethod
    def load(cls, path: str | Path) -> FrozenRecord:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"{path}: frozen record schema_version {data.get('schema_version')} is not "
                             f"{SCHEMA_VERSION}; write it again with the compile check's --frozen write")
        return cls(data["kernel"], dict(data["versions"]), dict(data.get("toolchain") or {}), SCHEMA_VERSION)

    def write(self, path: str | Path) -> None:
        from .fsutil import atomic_write_text

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(path), json.dumps(self.to_json(), indent=1) + "\n")


def _version_key(name: str) -> tuple[int, str]:
    from .registry import version_sort_key

    return version_sort_key(name)


def compare(recorded: Mapping[str, Mapping[str, Any]], now: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One sentence per version whose digests differ from the record, or that one side lacks (only the versions
    in ``now`` are checked: a partial check, ``--versions``, covers what it computed)."""
    problems = []
    for name in sorted(now, key=_version_key):
        if name not in recorded:
            problems.append(f"{name} has no recorded digest: record it once its numbers are in a run "
                            f"(--frozen write --versions {name})")
            continue
        old, new = recorded[name].get("kernels", {}), now[name].get("kernels", {})
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        if changed:
            problems.append(f"{name} is frozen but its {now[name].get('kind')} changed ({', '.join(changed)}); "
                            f"put the change in a new version instead")
    return problems


def frozen_path(root: str | Path, kernel: str) -> Path:
    return Path(root) / "docs" / "kernels" / kernel / "frozen.json"
