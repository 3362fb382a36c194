"""The static checker's rule table: forbidden imports and call patterns, and the allow-list matching.

Patterns are fnmatch globs over fully qualified names (``torch.linalg.*``); see
:mod:`pytest_kforge.trust.static` for what each rule means and how findings are allowed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["Finding", "DSL_LANGUAGES"]

DSL_LANGUAGES = frozenset({"cutile-dsl", "cute-dsl"})
_DSL_ROOTS = ("cuda.tile", "cutlass", "cuda.bindings")
_FORBIDDEN_IMPORTS = {
    **dict.fromkeys(("flashinfer", "flash_mla", "flash_attn", "vllm", "sglang", "triton", "xformers",
                     "deep_gemm", "tilelang"), "imports {m}, another kernel library; a version must compute with its own kernel"),
    **dict.fromkeys(("ctypes", "cffi"), "imports {m}, a foreign-function interface that can bypass every harness check"),
    **dict.fromkeys(("subprocess", "multiprocessing", "pty", "socket"), "imports {m}; a version must not start "
                                                                        "processes or talk to the network"),
    **dict.fromkeys(("threading", "_thread", "concurrent", "asyncio"), "imports {m}; background work would finish "
                                                                       "after the timer stops"),
    **dict.fromkeys(("pickle", "shelve", "marshal"), "imports {m}, which persists or loads data across calls"),
    **dict.fromkeys(("pytest_kforge", "_pytest", "pytest"), "imports {m}, the test harness; a version must not touch its judge"),
    "importlib": "imports importlib, which hides what the version really calls",
}
_ATTENTION = ("torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
              "torch.nn.attention.*", "torch.nn.functional.multi_head_attention_forward",
              "torch.nn.MultiheadAttention", "torch.ops.aten._scaled_dot_product*", "*flex_attention*")
_TORCH_COMPUTE = ("torch.softmax", "torch.log_softmax", "torch.einsum", "torch.matmul", "torch.bmm", "torch.mm",
                  "torch.baddbmm", "torch.addmm", "torch.addbmm", "torch.logsumexp", "torch.tensordot",
                  "torch.inner", "torch.linalg.*", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
                  "torch.nn.functional.linear", "torch.special.softmax", "torch.ops.*", "torch.compile",
                  "torch._inductor.*", "torch._dynamo.*", "torch.cuda.jiterator.*", "torch.func.*")
_TORCH_METHODS = frozenset({"softmax", "log_softmax", "matmul", "bmm", "mm", "baddbmm", "addmm", "logsumexp",
                            "einsum", "__matmul__", "__rmatmul__"})
_FILE_CALLS = ("open", "io.open", "os.open", "os.fdopen", "os.remove", "os.unlink", "os.rename", "os.replace",
               "os.makedirs", "os.mkdir", "os.rmdir", "os.removedirs", "os.symlink", "os.link", "os.chmod",
               "os.truncate", "os.write", "os.read", "shutil.*", "tempfile.*", "torch.save", "torch.load",
               "numpy.save*", "numpy.load*", "pathlib.Path.*")
_FILE_METHODS = frozenset({"write_text", "write_bytes", "read_text", "read_bytes", "touch", "symlink_to",
                           "hardlink_to", "unlink", "rmdir", "tofile", "fromfile"})
_PROCESS_CALLS = ("os.system", "os.popen", "os.exec*", "os.spawn*", "os.fork*", "os.kill*", "os.posix_spawn*",
                  "os._exit", "subprocess.*")
_DYNAMIC_CALLS = ("eval", "exec", "compile", "__import__", "globals", "vars", "locals", "importlib.*",
                  "builtins.*", "sys.modules*", "sys.settrace", "sys.setprofile")
_STREAM_CALLS = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
                 "torch.Stream", "torch.cuda.streams.*", "*.cuStreamCreate*", "*.cudaStreamCreate*")
_LRU = ("functools.lru_cache", "functools.cache")
_COMPILE_WORDS = ("compile", "jit", "dlpack", "replace_hints", "make_ptr")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem in a version's source: ``path:line: [rule] message``."""

    path: str
    line: int
    rule: str
    target: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.rule}] {self.message}"


def _match(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _allowed(f: Finding, allow: Sequence[str]) -> bool:
    for entry in allow:
        file_pat, _, rest = entry.rpartition("::")
        if file_pat and not (fnmatch.fnmatchcase(Path(f.path).name, file_pat) or fnmatch.fnmatchcase(f.path, file_pat)):
            continue
        rule, _, target = rest.partition(":")
        if fnmatch.fnmatchcase(f.rule, rule) and (not target or fnmatch.fnmatchcase(f.target, target)):
            return True
    return False
