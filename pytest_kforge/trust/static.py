"""Static checks of a version's source (its AST): what a kernel version must not do.

Every version (any language) must not: import other kernel libraries (flashinfer, flash_mla,
flash_attn, vllm, sglang, triton, xformers) or process/thread/FFI modules (subprocess, ctypes,
threading, ...); read or write files; run processes; evaluate code or look attributes up by
computed names; assign into imported modules or objects (monkey-patching torch.cuda.Event,
time.perf_counter, pytest_kforge, the spec ...); keep values computed from its tensor arguments
in module state (compiled-kernel caches are fine); key a module-level cache on ``data_ptr()`` /
``id()`` of its tensors; memoise over tensor arguments; create or switch CUDA streams.

A DSL version (``cutile-dsl`` / ``cute-dsl``) in addition must not call the spec's reference or
another version, torch attention (``scaled_dot_product_attention``, flex attention), and, on its
hot path (``run`` and every function it reaches, plus sibling helper modules, but not the bodies
of ``@ct.kernel`` / ``@cute.kernel`` / ``@cute.jit`` functions), torch compute such as softmax,
einsum, matmul, bmm, ``@``, ``torch.ops`` or ``torch.compile``.

Each :class:`Finding` has a line number and one sentence.  Legitimate uses are allowed through an
allow-list of patterns ``rule``, ``rule:target`` or ``file-glob::rule:target`` (fnmatch, e.g.
``"torch-compute:torch.matmul"`` or ``"v3*.py::file-io:open"``), given by the project (the
``kforge_trust_allow`` ini option), never by the version itself.  The rule table (forbidden imports
and call patterns) and the allow-list matching are in :mod:`.static_rules`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

from .static_rules import (_ATTENTION, _COMPILE_WORDS, _DSL_ROOTS, _DYNAMIC_CALLS, _FILE_CALLS, _FILE_METHODS,
                           _FORBIDDEN_IMPORTS, _LRU, _PROCESS_CALLS, _STREAM_CALLS, _TORCH_COMPUTE, _TORCH_METHODS,
                           DSL_LANGUAGES, Finding, _allowed, _match)

__all__ = ["Finding", "check_source", "check_file", "check_version", "DSL_LANGUAGES"]


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, path: str, language: str, tensor_names: set[str], output_names: set[str],
                 whole_module_hot: bool) -> None:
        self.tree, self.path, self.dsl = tree, path, language in DSL_LANGUAGES
        self.tensor_names, self.output_names = tensor_names, output_names
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.imported_modules: list[tuple[str, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                    self.imported_modules.append((a.name, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = ("." * node.level) + (node.module or "")
                self.imported_modules.append((base, node.lineno))
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
                    if node.level or (node.module or "").startswith("kforge_kernels"):
                        self.imported_modules.append((f"{base}.{a.name}", node.lineno))
        self.module_names = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                             for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        self.funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.hot = set(self.funcs) if whole_module_hot else self._reachable("run")
        self._func_stack: list[ast.AST] = []
        self._dsl_depth = 0

    # ---- helpers ----------------------------------------------------------------------------
    def add(self, node: ast.AST, rule: str, target: str, message: str) -> None:
        self.findings.append(Finding(self.path, getattr(node, "lineno", 0), rule, target, message))

    def qual(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            base = self.qual(node.func)
            return f"{base}()" if base else None
        return None

    def root(self, node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    def _reachable(self, start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start] if start in self.funcs else []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for n in ast.walk(self.funcs[name]):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.funcs:
                    todo.append(n.func.id)
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not self.funcs[name]:
                    todo.append(n.name)
        return seen

    def _is_dsl_decorated(self, fn: ast.AST) -> bool:
        for d in getattr(fn, "decorator_list", []):
            q = self.qual(d.func if isinstance(d, ast.Call) else d) or ""
            if q.startswith(_DSL_ROOTS):
                return True
        return False

    def on_hot_path(self) -> bool:
        return self._dsl_depth == 0 and any(getattr(f, "name", None) in self.hot for f in self._func_stack)

    # ---- imports ----------------------------------------------------------------------------
    def check_imports(self) -> None:
        for mod, line in self.imported_modules:
            top = mod.lstrip(".").split(".")[0]
            node = ast.Pass(lineno=line)
            if top in _FORBIDDEN_IMPORTS and not mod.startswith("."):
                self.add(node, "forbidden-import", mod, _FORBIDDEN_IMPORTS[top].format(m=mod))
            last = mod.rsplit(".", 1)[-1]
            if self.dsl and (mod.startswith("kforge_kernels") or mod.startswith(".")) and last == "v0":
                self.add(node, "reference", mod, f"imports {mod}, the reference run as a kernel; a DSL version must "
                                                 f"compute with its own kernel")

    # ---- visitors ---------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            q = self.qual(d.func if isinstance(d, ast.Call) else d) or ""
            params = {a.arg for a in node.args.args + node.args.kwonlyargs}
            if _match(q, _LRU) and params & self.tensor_names:
                self.add(d, "cache-key", q, f"{node.name} is memoised with {q} over tensor arguments, which replays "
                                            f"results for reused tensors")
        dsl = self._is_dsl_decorated(node)
        self._func_stack.append(node)
        self._dsl_depth += dsl
        self.generic_visit(node)
        self._dsl_depth -= dsl
        self._func_stack.pop()
        if self._func_stack == []:
            self._check_cache_function(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self.dsl and node.attr == "reference" and isinstance(node.ctx, ast.Load):
            self.add(node, "reference", f"{self.qual(node) or node.attr}",
                     "uses the spec's reference; a DSL version must compute the result with its own kernel")
        q = self.qual(node) or ""
        if q.startswith("sys.modules") or q in ("builtins.__dict__",) or node.attr in ("__globals__", "__builtins__"):
            self.add(node, "dynamic-code", q or node.attr, f"touches {q or node.attr}, which can reach and alter any module")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.dsl and isinstance(node.op, ast.MatMult) and self.on_hot_path():
            self.add(node, "torch-compute", "@", "multiplies with @ on the hot path; a DSL version must do its math "
                                                 "in its kernel")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        q = self.qual(node.func) or ""
        fn = node.func
        if q in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            name = node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.add(node, "dynamic-code", q, f"calls {q} with a computed attribute name, which hides what is used")
            elif q != "hasattr":
                base = self.qual(node.args[0])
                if base:
                    self._check_call_name(node, f"{base}.{name.value}")
                if q in ("setattr", "delattr") and self.root(node.args[0]) in self.aliases:
                    self.add(node, "monkeypatch", f"{base}.{name.value}",
                             f"{q} on {base}.{name.value} changes an imported module or object; versions must not "
                             f"patch their surroundings")
        self._check_call_name(node, q)
        if isinstance(fn, ast.Attribute):
            recv = self.qual(fn.value) or ""
            if fn.attr in _FILE_METHODS or (fn.attr == "open" and recv.endswith(("Path()", "pathlib.Path()"))):
                self.add(node, "file-io", f"*.{fn.attr}", f"calls .{fn.attr}(); a version must not read or write files")
            if (self.dsl and fn.attr in _TORCH_METHODS and not recv.startswith(_DSL_ROOTS) and recv != "torch"
                    and not recv.startswith("torch.") and self.on_hot_path()):
                self.add(node, "torch-compute", f"*.{fn.attr}",
                         f"calls .{fn.attr}() on the hot path; a DSL version must do its math in its kernel")
        self.generic_visit(node)

    def _check_call_name(self, node: ast.AST, q: str) -> None:
        if not q:
            return
        if _match(q, _FILE_CALLS):
            self.add(node, "file-io", q, f"calls {q}; a version must not read or write files")
        if _match(q, _PROCESS_CALLS):
            self.add(node, "process", q, f"calls {q}; a version must not start or signal processes")
        if _match(q, _DYNAMIC_CALLS):
            self.add(node, "dynamic-code", q, f"calls {q}, which hides what the version really runs")
        if _match(q, _STREAM_CALLS):
            self.add(node, "side-stream", q, f"calls {q}; work off the current stream escapes the timer")
        if q.endswith("load_version") or q.endswith(".v0.run"):
            if self.dsl:
                self.add(node, "reference", q, f"calls {q}, another version; a DSL version must compute with its own kernel")
        if self.dsl and _match(q, _ATTENTION):
            self.add(node, "torch-attention", q, f"calls {q}; a DSL version must not use torch attention")
        elif self.dsl and _match(q, _TORCH_COMPUTE) and self.on_hot_path():
            self.add(node, "torch-compute", q, f"calls {q} on the hot path; a DSL version must do its math in its kernel")

    def _check_store(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_store(t, node)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = self.root(target)
            if root in self.aliases and not (isinstance(target, ast.Subscript) and root in self.module_names):
                what = self.qual(target.value if isinstance(target, ast.Subscript) else target) or root
                self.add(node, "monkeypatch", what or "",
                         f"assigns into {what}, an imported module or object; versions must not patch torch, timers, "
                         f"the spec or the harness")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node)
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign  # type: ignore[assignment]

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_store(t, node)
        self.generic_visit(node)

    # ---- caches ------------------------------------------------------------------------------
    def _check_cache_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Module state written with an output tensor, or keyed by data_ptr()/id() of a tensor."""
        globals_declared = {n for s in ast.walk(fn) if isinstance(s, ast.Global) for n in s.names}
        state = self.module_names | globals_declared

        def refs(expr: ast.AST, names: set[str]) -> bool:
            """``expr`` uses one of ``names`` outside compile/jit calls (compiled-kernel caches are fine)."""
            if isinstance(expr, ast.Call) and any(w in (self.qual(expr.func) or "").lower() for w in _COMPILE_WORDS):
                return False
            if isinstance(expr, ast.Name):
                return expr.id in names
            return any(refs(c, names) for c in ast.iter_child_nodes(expr))

        uses_state = False
        for n in ast.walk(fn):
            stores: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(n, ast.Assign):
                stores = [(t, n.value) for t in n.targets]
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and self.root(n.func) in state:
                uses_state = True
                if n.func.attr in ("append", "extend", "setdefault", "update", "add", "insert", "__setitem__"):
                    stores = [(n.func, a) for a in n.args]
            for target, value in stores:
                tgt_root = self.root(target) if isinstance(target, (ast.Subscript, ast.Attribute)) else (
                    target.id if isinstance(target, ast.Name) and target.id in globals_declared else None)
                if tgt_root in state and refs(value, self.tensor_names | self.output_names):
                    self.add(n, "output-stash", tgt_root,
                             f"{fn.name} keeps a value computed from its tensors in module state ({tgt_root}), "
                             f"which can replay results across calls")
            if isinstance(n, ast.Subscript) and self.root(n) in state:
                uses_state = True
        if not uses_state:
            return
        for n in ast.walk(fn):
            if isinstance(n, ast.Call):
                q = self.qual(n.func) or ""
                arg = n.func.value if isinstance(n.func, ast.Attribute) else (n.args[0] if n.args else None)
                keyish = q == "id" or q.endswith((".data_ptr", "._cdata", ".untyped_storage", ".storage"))
                if keyish and arg is not None and self.root(arg) in self.tensor_names:
                    self.add(n, "cache-key", q, f"{fn.name} keys module state on {q} of a tensor argument, the "
                                                f"pattern of a result cache")


def _language_of(tree: ast.Module) -> str | None:
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LANGUAGE" for t in n.targets):
            if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
                return n.value.value
    return None


def _run_params(tree: ast.Module) -> tuple[set[str], set[str]]:
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "run":
            pos = {a.arg for a in n.args.posonlyargs + n.args.args}
            kw = {a.arg for a in n.args.kwonlyargs} - {"config"}
            return pos | kw, kw
    return set(), set()


def check_source(source: str, *, language: str | None = None, path: str = "<version>",
                 allow: Sequence[str] = (), tensor_names: Iterable[str] = (), output_names: Iterable[str] = (),
                 whole_module_hot: bool = False) -> list[Finding]:
    """Findings for one module's source; ``language`` defaults to its ``LANGUAGE`` assignment."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return [Finding(path, exc.lineno or 0, "syntax", "", f"does not parse: {exc.msg}")]
    lang = language or _language_of(tree) or "torch"
    names, outs = _run_params(tree)
    checker = _Checker(tree, path, lang, names | set(tensor_names), outs | set(output_names), whole_module_hot)
    checker.check_imports()
    checker.visit(tree)
    seen: set[tuple[int, str, str]] = set()
    result = []
    for f in sorted(checker.findings, key=lambda f: (f.line, f.rule)):
        if (f.line, f.rule, f.target) not in seen and not _allowed(f, allow):
            seen.add((f.line, f.rule, f.target))
            result.append(f)
    return result


def _kernel_root(folder: Path) -> Path:
    """The kernel folder a file in ``folder`` belongs to (the nearest one up with a ``spec.py``), else ``folder``."""
    for d in (folder, *list(folder.parents)[:2]):
        if (d / "spec.py").is_file():
            return d
    return folder


def _module_candidates(module: str, folder: Path) -> list[Path]:
    """Files that ``module`` (``kforge_kernels.<kernel>.a.b...`` or relative ``.a``) may name, longest path first:
    a name imported from a package (``from kforge_kernels.mla.cute import host``) is a module too."""
    if module.startswith("."):
        parts, bases = [p for p in module.lstrip(".").split(".") if p], [folder]
    else:
        parts = module.split(".")[2:]
        root = _kernel_root(folder)
        bases = [root] + ([root / "versions"] if (root / "versions").is_dir() else [])
    return [base.joinpath(*parts[:n]).with_suffix(".py") for n in range(len(parts), 0, -1) for base in bases]


def _siblings(source: str, folder: Path) -> list[Path]:
    """The kernel-folder modules ``source`` imports (the helpers its hot path may reach)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for n in ast.walk(tree):
        mods: list[str] = []
        if isinstance(n, ast.ImportFrom):
            base = ("." * n.level) + (n.module or "")
            mods = [f"{base}.{a.name}" if n.level and not n.module else base for a in n.names]
            mods += [f"{base}.{a.name}" for a in n.names]
        elif isinstance(n, ast.Import):
            mods = [a.name for a in n.names]
        for m in mods:
            if not (m.startswith(".") or m.startswith("kforge_kernels.")):
                continue
            candidate = next((c for c in _module_candidates(m, folder) if c.is_file()), None)
            if candidate is not None and candidate.stem not in ("spec", "v0"):
                out.append(candidate)
    return out


def check_file(path: str | Path, *, language: str | None = None, allow: Sequence[str] = (),
               follow_helpers: bool = True) -> list[Finding]:
    """Findings for a version file and (with ``follow_helpers``) the sibling modules it imports."""
    path = Path(path)
    source = path.read_text(encoding="utf-8")
    try:
        tree: ast.Module | None = ast.parse(source)
    except SyntaxError:
        tree = None
    lang = language or (_language_of(tree) if tree else None) or "torch"
    findings = check_source(source, language=lang, path=str(path), allow=allow)
    if follow_helpers and tree is not None:
        tree_names, outs = _run_params(tree)
        seen = {path.resolve()}
        todo = _siblings(source, path.parent)
        while todo:
            helper = todo.pop()
            if helper.resolve() in seen:
                continue
            seen.add(helper.resolve())
            text = helper.read_text(encoding="utf-8")
            findings += check_source(text, language=lang, path=str(helper), allow=allow, tensor_names=tree_names,
                                     output_names=outs, whole_module_hot=True)
            todo += _siblings(text, helper.parent)
    return findings


def check_version(version: object, *, allow: Sequence[str] = ()) -> list[Finding]:
    """Findings for a :class:`pytest_kforge.registry.Version` (its file, language and helpers)."""
    return check_file(version.path, language=version.language, allow=allow)  # type: ignore[attr-defined]
