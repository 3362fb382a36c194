"""``python -m pytest_kforge.export``: a version as a package that stands alone (CPU only: nothing here launches).

The MLA export templates are read from ``kernels/mla/export/`` (or, until they move there, ``.export_staging/mla/``).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_kforge.export import FORBIDDEN, ExportError, Exported, export, main

pytestmark = pytest.mark.usefixtures("isolated_kernels")

ROOT = Path(__file__).resolve().parents[1]
KDIR = ROOT / "kernels"
MLA_TEMPLATES = next((p for p in (KDIR / "mla" / "export", ROOT / ".export_staging" / "mla") if p.is_dir()), None)
needs_templates = pytest.mark.skipif(MLA_TEMPLATES is None, reason="no MLA export templates in this checkout")


def _absolute_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or "")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _clean_env(path: Path) -> dict[str, str]:
    """The environment of a process that sees ``path`` and the installed packages, nothing of this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KFORGE_"))}
    env["PYTHONPATH"] = str(path)
    return env


@pytest.fixture(scope="module")
def mla(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    if MLA_TEMPLATES is None:
        pytest.skip("no MLA export templates in this checkout")
    return export("mla", "v59_cute", tmp_path_factory.mktemp("export"), kernels_dir=KDIR, templates=MLA_TEMPLATES)


@needs_templates
def test_the_package_holds_the_version_its_modules_the_api_and_a_test(mla: Exported) -> None:
    pkg = mla.root
    assert mla.package == "mla_v59_cute" and pkg.name == "mla_v59_cute"
    for rel in ("__init__.py", "v59_cute.py", "reference.py", "README.md", "cute/__init__.py", "cute/host.py",
                "cute/plan.py", "cute/kinds.py", "cute/seesaw_stale.py", "cute/persistent.py",
                "tests/__init__.py", "tests/test_mla_v59_cute.py"):
        assert (pkg / rel).is_file(), rel
    assert {"cute/host.py", "cute/plan.py", "v59_cute.py"} <= set(mla.modules)
    assert {"torch", "cutlass"} <= set(mla.third_party)
    readme = (pkg / "README.md").read_text()
    assert "nvidia-cutlass-dsl[cu13]==4.8.1" in readme and "sm_90" in readme and "{{" not in readme
    if (ROOT / "docs" / "kernels" / "mla" / "best.json").is_file():
        assert "| spec | spec-b32-s16-t4096-h128 |" in readme


@needs_templates
def test_no_file_imports_the_harness_or_the_registry(mla: Exported) -> None:
    for path in mla.root.rglob("*.py"):
        bad = {m for m in _absolute_imports(path) if m.split(".")[0] in FORBIDDEN}
        assert not bad, f"{path}: {bad}"


@needs_templates
def test_kernel_modules_are_byte_identical_but_for_their_import_lines(mla: Exported) -> None:
    for rel in mla.modules:
        src = next(p for p in (KDIR / "mla" / rel, KDIR / "mla" / "versions" / rel, KDIR / rel) if p.is_file())
        old = src.read_text(encoding="utf-8").splitlines(keepends=True)
        new = (mla.root / rel).read_text(encoding="utf-8").splitlines(keepends=True)
        assert len(old) == len(new), rel
        for a, b in zip(old, new):
            if a != b:
                assert ("kforge_kernels.mla" in a or "kforge_kernels._shared" in a) and "kforge_kernels" not in b \
                    and "import" in b, (rel, a, b)
                assert a.split("import", 1)[1] == b.split("import", 1)[1], (rel, a, b)  # the names are untouched
    plan = (mla.root / "cute" / "plan.py").read_text()
    assert "from . import host as host" in plan and "from .kinds import (bf16_partials" in plan
    assert "from .cute.host import EVICT_FEATURES" in (mla.root / "v59_cute.py").read_text()
    # the shared launch helper travels with the package (kernels/_shared -> _shared/)
    assert "_shared/cute_fastcall.py" in mla.modules and "from .._shared import cute_fastcall as fastcall" in plan


@needs_templates
def test_the_package_imports_in_a_clean_process_without_the_harness(mla: Exported) -> None:
    code = ("import sys, mla_v59_cute as m; "
            "assert m.VERSION == 'v59_cute' and callable(m.mla_decode) and callable(m.plan); "
            "leaked = sorted(n for n in sys.modules if n.split('.')[0] in ('pytest_kforge', 'kforge_kernels', "
            "'kernels', 'benchmarks')); "
            "assert not leaked, leaked; print(m.mla_decode.__module__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=mla.root.parent, env=_clean_env(mla.root.parent),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "mla_v59_cute"


@needs_templates
def test_the_exported_test_collects_and_skips_without_a_gpu(mla: Exported) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the exported test would run for real (run it on its own)")
    env = {**_clean_env(mla.root.parent), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # as an engine's CI would
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(mla.root)],
                          cwd=mla.root.parent, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert " skipped" in out and "passed" not in out and "error" not in out.lower(), out
    assert "needs a CUDA GPU" in out, out


def test_an_unknown_kernel_or_version_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"unknown kernel 'nope': .* has mla") as err:
        export("nope", "v0", tmp_path, kernels_dir=KDIR)
    assert str(err.value).endswith(".") and "\n" not in str(err.value)
    with pytest.raises(ExportError, match=r"kernel 'mla' has no version 'v999'; pass one of v0, .*v59_cute"):
        export("mla", "v999", tmp_path, kernels_dir=KDIR)
    assert not list(tmp_path.iterdir())


def test_the_torch_baseline_says_why_it_cannot_stand_alone(tmp_path: Path) -> None:
    """mla v0 runs the spec's reference, and the spec is the harness's: the export names that import."""
    with pytest.raises(ExportError, match=r"cannot export mla v0: mla_v0/spec\.py \(kernels/mla/spec\.py, imported "
                                          r"by v0\) imports pytest_kforge\.spec at line \d+; .*"):
        export("mla", "v0", tmp_path, kernels_dir=KDIR)
    assert not list(tmp_path.iterdir()), "nothing is written when the export fails"


def test_a_torch_version_without_templates_exports_its_run(tmp_path: Path) -> None:
    done = export("softmax", "v1", tmp_path, kernels_dir=KDIR)
    assert done.modules == ("v1.py",) and done.others == ("__init__.py",)
    code = "import sys, softmax_v1 as m; assert callable(m.run); assert 'pytest_kforge' not in sys.modules"
    ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_clean_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["softmax", "v1", str(tmp_path), "--kernels-dir", str(KDIR), "--name", "sm1"]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'sm1'}: 1 kernel modules")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("export: ") and "pass --force" in err and err.count("\n") == 1
    assert main([*args, "--force"]) == 0
    for bad in ("torch", "class", "pytest_kforge", "9lives"):
        assert main(["softmax", "v1", str(tmp_path), "--kernels-dir", str(KDIR), "--name", bad]) == 2
        assert "pass another with --name" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sm1"]


# ---- a made-up kernel: every import form, and every refusal --------------------------------------------------------

SPEC = '''
from pytest_kforge.spec import KernelSpec, Tolerance


class ToySpec(KernelSpec):
    name = "toy"
    input_names = ("x",)
    output_names = ("y",)
    trials = {"small": {"n": 8}}
    default_trials = ("small",)
    tolerances = {"y": Tolerance(max_abs=1e-3, rel_l2=1e-3)}


SPEC = ToySpec()
'''
V0 = '''"""toy v0."""
from __future__ import annotations

import math
from kforge_kernels.toy.lib.helpers import (scale,
                                            shift)  # keep me
import kforge_kernels.toy.lib.deep as deep, math as m2
from . import shared

LANGUAGE = "torch"
DESCRIPTION = "every import form"


def run(x, *, y, config=None):
    from kforge_kernels.toy.lib import helpers as h
    return h.scale(x) + deep.ONE + shared.TWO + math.pi * m2.e + shift(0)
'''
HELPERS = '''from . import deep
from kforge_kernels.toy import shared


def scale(x):
    return x * deep.ONE * shared.TWO


def shift(x):
    return x
'''


def _toy(tmp_path: Path, **versions: str) -> Path:
    kdir = tmp_path / "proj" / "kernels"
    (kdir / "toy" / "versions").mkdir(parents=True)
    (kdir / "toy" / "lib").mkdir()
    (kdir / "toy" / "spec.py").write_text(SPEC)
    (kdir / "toy" / "shared.py").write_text("TWO = 2\n")
    (kdir / "toy" / "lib" / "helpers.py").write_text(HELPERS)
    (kdir / "toy" / "lib" / "deep.py").write_text("ONE = 1\n")
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    for name, text in {"v0": V0, **versions}.items():
        (kdir / "toy" / "versions" / f"{name}.py").write_text(textwrap.dedent(text))
    return kdir


def test_every_import_form_becomes_relative_and_runs(tmp_path: Path) -> None:
    kdir = _toy(tmp_path)
    tmpl = tmp_path / "tmpl"
    (tmpl / "extra").mkdir(parents=True)
    (tmpl / "__init__.py.tmpl").write_text('"""{{package}} of {{kernel}} {{version}}: {{description}}."""\n'
                                           "from .{{version}} import run as run\nTRIALS = {{trials}}\n")
    (tmpl / "extra" / "{{package}}_notes.md").write_text("{{measured}}\n")
    out = tmp_path / "out"
    done = export("toy", "v0", out, kernels_dir=kdir, templates=tmpl)
    assert done.modules == ("lib/deep.py", "lib/helpers.py", "shared.py", "v0.py")
    assert set(done.others) == {"__init__.py", "lib/__init__.py", "extra/__init__.py", "extra/toy_v0_notes.md"}
    v0 = (out / "toy_v0" / "v0.py").read_text()
    assert "from .lib.helpers import (scale,\n                                            shift)  # keep me\n" in v0
    assert "from .lib import deep as deep; import math as m2\n" in v0
    assert "    from .lib import helpers as h\n" in v0 and "from . import shared\n" in v0
    assert (out / "toy_v0" / "lib" / "helpers.py").read_text() == HELPERS.replace("from kforge_kernels.toy ", "from .. ")
    assert "Not measured" in (out / "toy_v0" / "extra" / "toy_v0_notes.md").read_text()
    code = "import toy_v0 as t; assert t.run(1.0, y=None) > 0; print(t.TRIALS, t.__doc__)"
    ran = subprocess.run([sys.executable, "-c", code], cwd=out, env=_clean_env(out), capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "{'small': {'n': 8}} toy_v0 of toy v0: every import form."


SHARED_HELPER = '''"""A host helper every kernel may import."""

from . import consts


def triple(x):
    return x * consts.THREE
'''


def test_shared_helpers_are_vendored_under_the_package(tmp_path: Path) -> None:
    kdir = _toy(tmp_path, v1='''
        from kforge_kernels._shared.helper import triple
        import kforge_kernels._shared.consts as c
        LANGUAGE = "torch"
        DESCRIPTION = "uses kernels/_shared"
        def run(x, *, y, config=None):
            from kforge_kernels._shared import helper
            return triple(x) + helper.triple(c.THREE)
        ''')
    (kdir / "_shared").mkdir()
    (kdir / "_shared" / "helper.py").write_text(SHARED_HELPER)
    (kdir / "_shared" / "consts.py").write_text("THREE = 3\n")
    out = tmp_path / "out"
    done = export("toy", "v1", out, kernels_dir=kdir)
    assert done.modules == ("_shared/consts.py", "_shared/helper.py", "v1.py")
    assert "_shared/__init__.py" in done.others
    v1 = (out / "toy_v1" / "v1.py").read_text()
    assert "from ._shared.helper import triple\n" in v1 and "from ._shared import consts as c\n" in v1
    assert "    from ._shared import helper\n" in v1
    assert (out / "toy_v1" / "_shared" / "helper.py").read_text() == SHARED_HELPER  # its own imports are relative
    ran = subprocess.run([sys.executable, "-c", "import toy_v1 as t; print(t.run(2, y=None))"], cwd=out,
                         env=_clean_env(out), capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "15"


@pytest.mark.parametrize(("source", "message"), [
    ("import benchmarks.public_call as pc\nLANGUAGE = 'torch'\nDESCRIPTION = 'x'\ndef run(x, *, y, config=None):\n"
     "    return y\n", r"imports benchmarks\.public_call at line 1; an exported package must "
                      r"not need the harness"),
    ("from kforge_kernels.mla.cute import host\n", r"imports kforge_kernels\.mla\.cute at line 1; import modules of "
                                                    r"kernels/toy/ or kernels/_shared/ only"),
    ("import kforge_kernels.toy.lib.deep\n", r"imports kforge_kernels\.toy\.lib\.deep at line 1; a relative import needs "
                                           r"`import a\.b as c`"),
    ("from kforge_kernels.toy.nowhere import x\n", r"imports kforge_kernels\.toy\.nowhere at line 1; no such module"),
    ("from kforge_kernels._shared.nowhere import x\n", r"imports kforge_kernels\._shared\.nowhere at line 1; no such "
                                                      r"shared module"),
    ("import toyutil\n", r"imports toyutil at line 1; it is a module of this project outside the package"),
])
def test_what_would_not_stand_alone_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
                                               message: str) -> None:
    kdir = _toy(tmp_path, v1=source)
    (kdir.parent / "toyutil.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(kdir.parent))
    with pytest.raises(ExportError, match=r"cannot export toy v1: toy_v1/v1\.py \(kernels/toy/versions/v1\.py, the "
                                          r"version\) " + message):
        export("toy", "v1", tmp_path / "out", kernels_dir=kdir)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_template_with_an_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    kdir = _toy(tmp_path)
    (tmp_path / "tmpl").mkdir()
    (tmp_path / "tmpl" / "README.md").write_text("{{package}} {{nonsense}}\n")
    with pytest.raises(ExportError, match=r"has unknown placeholder\(s\) nonsense; use only description, kernel"):
        export("toy", "v0", tmp_path / "out", kernels_dir=kdir, templates=tmp_path / "tmpl")


def test_a_template_importing_what_the_package_lacks_is_refused(tmp_path: Path) -> None:
    kdir = _toy(tmp_path)
    (tmp_path / "tmpl" / "extra").mkdir(parents=True)
    (tmp_path / "tmpl" / "extra" / "use.py").write_text("from . import missing\n")
    with pytest.raises(ExportError, match=r"toy_v0/extra/use\.py \(template .*\) imports \.missing at line 1; no such"):
        export("toy", "v0", tmp_path / "out", kernels_dir=kdir, templates=tmp_path / "tmpl")
