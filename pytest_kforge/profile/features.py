"""What a version already applies, so the profile does not recommend it again.

A feature is the name of a knowledge-base optimisation (``tma-mbarrier-pipeline``,
``warp-specialization-producer-consumer``, ``wgmma-over-mma-sync``...).  The profile report drops
an opportunity whose name is one of the version's features and says so in the report.

Where the features come from, first that applies:

1. the version module's optional ``FEATURES`` tuple (the registry checks its shape; read from the
   source without importing when the module does not import here).  Declared is final: an empty
   tuple says "none", so a wrong detection can always be overridden;
2. detection in the code of the kernel-folder modules the version loaded: the profiling driver
   reports them (``KFORGE-DRIVER: loaded: ...``) after its run, so a shared host module that can
   dispatch to several kernel files counts only the one it imported;
3. without that report (recorded CSVs): the version file and the kernel-folder modules it imports
   directly (one level).

Detection is conservative: it reads code only (comments and docstrings are dropped, other strings
such as inline PTX are kept), knows the markers in :data:`DETECTORS` and nothing else, and a
feature needs every marker group to match.  cuTile code is never detected: its compiler decides
whether loads use TMA or warps specialise, so a cuTile version declares ``FEATURES`` itself.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_kforge.registry import _PKG, module_file, version_path

__all__ = ["Detector", "DETECTORS", "code_text", "detect_features", "declared_features",
           "module_files", "direct_imports", "version_features"]


@dataclasses.dataclass(frozen=True)
class Detector:
    """A feature and its marker groups: every group must match (any one of its regexes)."""

    name: str
    groups: tuple[tuple[str, ...], ...]


_TMA = (r"\bmake_tiled_tma_atom\b", r"\bCopyBulkTensorTile\w*Op\b", r"\btma_partition\b",
        r"cp\.async\.bulk\.tensor", r"\bPipelineTma\w*\b")
_MBARRIER = (r"\bPipelineTma\w*\b", r"\bmbarrier_(?:init|arrive|wait|try_wait)\w*\b",
             r"mbarrier\.(?:init|arrive|try_wait)")

DETECTORS: tuple[Detector, ...] = (
    # TMA bulk copies into shared memory, completed on mbarriers (PipelineTmaAsync is both)
    Detector("tma-mbarrier-pipeline", (_TMA, _MBARRIER)),
    # register reallocation between a producer and consumer warpgroups: setmaxnreg dec AND inc
    Detector("warp-specialization-producer-consumer",
             ((r"\bsetmaxregister_decrease\b", r"\bwarpgroup_reg_dealloc\b", r"setmaxnreg\.dec"),
              (r"\bsetmaxregister_increase\b", r"\bwarpgroup_reg_alloc\b", r"setmaxnreg\.inc"))),
    # warpgroup MMAs (CuTe's warpgroup module, or wgmma PTX)
    Detector("wgmma-over-mma-sync",
             ((r"\bwarpgroup\.(?:MmaF16BF16Op|MmaF8Op|commit_group|wait_group)\b",
               r"\bwgmma\.(?:mma_async|commit_group|wait_group)"),)),
)


def code_text(source: str) -> str:
    """``source`` with comments and docstrings (string statements) blanked out; everything else,
    other strings (inline PTX) included, stays where it was.

    Returns "" for text that does not tokenize (it could not have been imported either).
    """
    offsets = [0]
    for line in io.StringIO(source):  # the lines tokenize reads (split at "\n" only)
        offsets.append(offsets[-1] + len(line))
    chars = list(source)
    start, depth = True, 0  # at the start of a statement outside brackets; bracket depth
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                start = True
                continue
            if tok.type in (tokenize.NL, tokenize.ENDMARKER):
                continue
            drop = tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and start and depth == 0)
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(0, depth - 1)
            if tok.type != tokenize.COMMENT:
                start = start and drop  # a docstring's continuation ("a" "b") is dropped too
            if drop:
                a = offsets[tok.start[0] - 1] + tok.start[1]
                b = offsets[tok.end[0] - 1] + tok.end[1]
                chars[a:b] = [c if c == "\n" else " " for c in chars[a:b]]
    except (tokenize.TokenError, SyntaxError):
        return ""
    return "".join(chars)


def detect_features(sources: Mapping[str, str], detectors: Sequence[Detector] = DETECTORS) -> dict[str, str]:
    """``{feature: evidence}`` for the detectors whose every group matches the code of ``sources``
    (``{label: source text}``); evidence reads ``detected `PipelineTmaAsync` in mla/cute/sm90.py``."""
    code = {label: code_text(text) for label, text in sources.items()}
    found: dict[str, str] = {}
    for det in detectors:
        hits: list[tuple[str, str]] = []
        for group in det.groups:
            hit = next(((m.group(0), label) for pat in group for label, text in code.items()
                        if (m := re.search(pat, text))), None)
            if hit is None:
                break
            if hit not in hits:
                hits.append(hit)
        else:
            where: dict[str, list[str]] = {}
            for marker, label in hits:
                where.setdefault(label, []).append(f"`{marker}`")
            found[det.name] = "detected " + ", ".join(f"{' + '.join(ms)} in {label}" for label, ms in where.items())
    return found


def declared_features(path: str | Path) -> tuple[str, ...] | None:
    """The literal module-level ``FEATURES`` of the version file at ``path`` (None when absent or
    not a literal); read without importing, for versions whose DSL does not import here."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, expr = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, expr = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id == "FEATURES"):
            continue
        try:
            value = ast.literal_eval(expr)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None
        if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(x, str) for x in value):
            return tuple(sorted(value)) if isinstance(value, (set, frozenset)) else tuple(value)
        return None
    return None


def module_files(names: Iterable[str], kernels_dir: str | Path) -> list[Path]:
    """The files under ``kernels_dir`` of the modules named ``kforge_kernels.<kernel>.<module>``."""
    root = Path(kernels_dir).resolve()
    out: list[Path] = []
    for name in names:
        cand = module_file(root, name)
        if cand is not None and cand not in out:
            out.append(cand)
    return out


def direct_imports(path: str | Path, kernel: str) -> list[str]:
    """Module names of the kernel folder that the file at ``path`` imports (anywhere in it, one level):
    ``kforge_kernels.<kernel>.x`` and relative imports; ``from kforge_kernels.<kernel> import x``
    names ``x`` as a candidate module (kept only where such a file exists)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    pkg = f"{_PKG}.{kernel}"
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.startswith(pkg + ".")]
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1:
                continue
            mod = f"{pkg}{'.' + node.module if node.module else ''}" if node.level else node.module or ""
            if mod == pkg:
                names += [f"{pkg}.{a.name}" for a in node.names]
            elif mod.startswith(pkg + "."):
                names.append(mod)
    return list(dict.fromkeys(names))


def version_features(kernels_dir: str | Path, kernel: str, version: str, *,
                     declared: Sequence[str] | None = None, loaded: Sequence[str] | None = None) -> dict[str, str]:
    """``{feature: why}`` for ``kernel version`` by the order of the module docstring.

    ``declared`` is the loaded module's ``FEATURES`` (None: not declared, or not importable here:
    then the file is read); ``loaded`` the module names the profiling driver reported.
    """
    path = version_path(Path(kernels_dir) / kernel, version)
    if declared is None:
        declared = declared_features(path)
    if declared is not None:
        return {name: "declared in FEATURES" for name in declared}
    names = list(loaded) if loaded else [f"{_PKG}.{kernel}.{version}", *direct_imports(path, kernel)]
    root = Path(kernels_dir).resolve()
    sources: dict[str, str] = {}
    for f in module_files(names, root):
        try:
            sources[f.relative_to(root).as_posix()] = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return detect_features(sources)
