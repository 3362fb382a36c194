"""Static checks: each forbidden pattern is found with its line; legitimate code and allow-lists pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_kforge.trust.static import check_file, check_source

ROOT = Path(__file__).resolve().parents[1]
CHEATS = Path(__file__).resolve().parent / "adversarial" / "kernels" / "cheat"

HEAD = 'LANGUAGE = "cutile-dsl"\n'


def rules(src: str, **kw) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in check_source(textwrap.dedent(src), **kw)]


@pytest.mark.parametrize("src, rule", [
    ("def run(x, *, y, config=None):\n    import torch\n    y.copy_(torch.softmax(x, -1))\n", "torch-compute"),
    ("def run(q, k, *, y, config=None):\n    y.copy_(q @ k)\n", "torch-compute"),
    ("def run(q, k, *, y, config=None):\n    y.copy_(q.matmul(k))\n", "torch-compute"),
    ("from torch import einsum as E\ndef run(q, k, *, y, config=None):\n    y.copy_(E('ij,jk->ik', q, k))\n", "torch-compute"),
    ("import torch.nn.functional as F\ndef run(q, *, y, config=None):\n    y.copy_(F.scaled_dot_product_attention(q, "
     "q, q))\n", "torch-attention"),
    ("from kforge_kernels.mla.spec import SPEC\ndef run(q, *, y, config=None):\n    y.copy_(SPEC.reference({'q': "
     "q})['y'])\n", "reference"),
    ("from kforge_kernels.mla import v0\ndef run(q, *, y, config=None):\n    return v0.run(q, y=y)\n", "reference"),
    ("import flashinfer\n", "forbidden-import"),
    ("from flash_mla import flash_mla_with_kvcache\n", "forbidden-import"),
    ("import triton.language as tl\n", "forbidden-import"),
    ("import ctypes\n", "forbidden-import"),
    ("import subprocess\n", "forbidden-import"),
    ("def run(x, *, y, config=None):\n    import os\n    os.system('nvidia-smi')\n", "process"),
    ("def run(x, *, y, config=None):\n    open('/tmp/cache', 'wb')\n", "file-io"),
    ("from pathlib import Path\ndef run(x, *, y, config=None):\n    Path('r.txt').write_text('1')\n", "file-io"),
    ("import torch\ntorch.cuda.Event = object\n", "monkeypatch"),
    ("import time\ntime.perf_counter = lambda: 0.0\n", "monkeypatch"),
    ("import pytest_kforge.timing as t\nt.floor_problem = lambda *a: None\n", "monkeypatch"),
    ("import torch\nsetattr(torch.cuda, 'synchronize', print)\n", "monkeypatch"),
    ("import torch\ndef run(x, *, y, config=None):\n    f = getattr(torch, 'mat' + 'mul')\n", "dynamic-code"),
    ("def run(x, *, y, config=None):\n    exec('y.copy_(x)')\n", "dynamic-code"),
    ("import sys\ndef run(x, *, y, config=None):\n    sys.modules['torch'].softmax\n", "dynamic-code"),
    ("_C = {}\ndef run(x, *, y, config=None):\n    _C[x.data_ptr()] = 1\n", "cache-key"),
    ("_C = {}\ndef run(x, *, y, config=None):\n    k = id(x)\n    if k in _C: return _C[k]\n", "cache-key"),
    ("_C = {}\ndef run(x, *, y, config=None):\n    _C[x.shape] = y.clone()\n", "output-stash"),
    ("import functools\n@functools.lru_cache\ndef run(x, *, y, config=None):\n    pass\n", "cache-key"),
    ("import torch\ndef run(x, *, y, config=None):\n    s = torch.cuda.Stream()\n", "side-stream"),
    ("import threading\n", "forbidden-import"),
])
def test_each_forbidden_pattern_is_found(src, rule):
    found = rules(HEAD + src)
    assert rule in {r for _, r in found}, found
    assert all(line >= 1 for line, _ in found)
    one = check_source(HEAD + src)[0]
    assert str(one).startswith("<version>:") and "\n" not in str(one)


def test_line_numbers_point_at_the_call():
    src = HEAD + "import torch\n\n\ndef run(x, *, y, config=None):\n    y.copy_(torch.matmul(x, x))\n"
    assert rules(src) == [(6, "torch-compute")]


def test_torch_versions_may_compute_with_torch_but_not_cheat():
    src = ("LANGUAGE = 'torch'\nimport torch\n_C = {}\ndef run(x, *, y, config=None):\n"
           "    y.copy_(torch.softmax(x, -1))\n    _C[1] = y\n")
    assert [r for _, r in rules(src)] == ["output-stash"]


def test_dsl_kernel_bodies_and_workspace_are_allowed():
    src = HEAD + textwrap.dedent("""
        import cuda.tile as ct
        import torch
        _COMPILED = {}

        @ct.kernel
        def k(A, B, C):
            c = ct.load(A) @ ct.load(B)
            ct.store(C, c)

        def helper(kernel, x):
            key = (id(kernel), tuple(x.shape))
            if key not in _COMPILED:
                _COMPILED[key] = kernel
            return _COMPILED[key]

        def run(x, *, y, config=None):
            work = torch.empty_like(y)
            k2 = helper(k, x)
            ct.launch(torch.cuda.current_stream(), (1,), k2, (x, work, y))
            return (y,)
    """)
    assert rules(src) == []


def test_matmul_off_the_hot_path_is_allowed():
    src = HEAD + ("import torch\ndef selftest(a):\n    return torch.matmul(a, a)\n"
                  "def run(x, *, y, config=None):\n    return (y,)\n")
    assert rules(src) == []


def test_allow_list():
    src = HEAD + "import torch\ndef run(x, *, y, config=None):\n    y.copy_(torch.matmul(x, x))\n    open('f')\n"
    assert {r for _, r in rules(src)} == {"torch-compute", "file-io"}
    assert [r for _, r in rules(src, allow=["torch-compute:torch.matmul"])] == ["file-io"]
    assert rules(src, allow=["torch-compute", "file-io:open"]) == []
    assert len(rules(src, allow=["other.py::torch-compute"])) == 2
    assert [r for _, r in rules(src, allow=["<version>::torch-compute"])] == ["file-io"]


def test_syntax_error_is_a_finding():
    assert rules("def run(:\n") == [(1, "syntax")]


def test_helpers_are_followed(tmp_path):
    (tmp_path / "_helper.py").write_text("import torch\ndef go(x, y):\n    y.copy_(torch.softmax(x, -1))\n")
    (tmp_path / "v1.py").write_text(HEAD + "from kforge_kernels.k import _helper\n"
                                    "def run(x, *, y, config=None):\n    _helper.go(x, y)\n    return (y,)\n")
    found = check_file(tmp_path / "v1.py")
    assert [(Path(f.path).name, f.rule) for f in found] == [("_helper.py", "torch-compute")]
    assert check_file(tmp_path / "v1.py", follow_helpers=False) == []


def test_repository_kernels_are_clean():
    files = sorted((ROOT / "kernels").glob("*/v*.py")) + sorted((ROOT / "kernels").glob("*/versions/v*.py"))
    assert files, "no kernel versions found"
    for f in files:
        assert check_file(f) == [], f


@pytest.mark.parametrize("name, rule", [
    ("v1_shapecache.py", "output-stash"), ("v2_ptrcache.py", "cache-key"), ("v3_fingerprint.py", "output-stash"),
    ("v4_reference.py", "reference"), ("v6_sidestream.py", "side-stream"),
])
def test_adversarial_versions_are_caught_statically(name, rule):
    found = check_file(CHEATS / name, language="cutile-dsl")
    assert rule in {f.rule for f in found}, [str(f) for f in found]


def test_helpers_in_a_library_folder_beside_versions_are_checked(tmp_path):
    """The kernels/mla layout: versions/ imports a module of a library folder; the helper's ctypes is found."""
    k = tmp_path / "k"
    (k / "versions").mkdir(parents=True)
    (k / "lib").mkdir()
    (k / "spec.py").write_text("SPEC = None\n")
    (k / "lib" / "helper.py").write_text("import ctypes\n\ndef launch(x):\n    return x\n")
    (k / "versions" / "v1.py").write_text(HEAD + "from kforge_kernels.k.lib.helper import launch\n"
                                          "def run(x, *, y, config=None):\n    return launch(y)\n")
    found = check_file(k / "versions" / "v1.py", language="cutile-dsl")
    assert any(f.path.endswith("helper.py") and f.rule == "forbidden-import" for f in found), [str(f) for f in found]


def test_every_shipped_version_and_the_modules_it_imports_pass_the_static_check() -> None:
    """The suite refuses a version whose code (or a kernel module it imports) trips a rule, so a harness-side edit of
    a shared module must be caught here, on the CPU: the MLA plan's LRU bump, written as an item assignment into
    the plan module (``_plan.MRU[0] = plan`` in cute/host.py), failed every CuTe version's correctness tests on the
    GPU (orchestrator run 20261207-090520-mla-a1de)."""
    from pytest_kforge.registry import Registry
    from pytest_kforge.trust.static import check_version

    reg = Registry(Path(__file__).resolve().parents[1] / "kernels")
    found = []
    for name in reg.kernel_names():
        kernel = reg.kernel(name)
        for version in kernel.version_names():
            found += [f"{name} {version}: {f}" for f in check_version(kernel.version(version))]
    assert not found, "\n".join(found[:10])
