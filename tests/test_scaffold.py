"""The kernel scaffold (issue 36): name checks, no overwrite, and a generated kernel whose suite passes at once."""

from __future__ import annotations

import re
from pathlib import Path

# Imported here, in the outer process: pytester's in-process runs drop the modules first imported
# inside them, and torch cannot be imported a second time.
import hypothesis  # noqa: F401
import pytest
import torch  # noqa: F401

from pytest_kforge import cli, scaffold
from pytest_kforge.scaffold import ScaffoldError, class_name, validate_name

FAST = ("-p", "no:cacheprovider", "--kforge-examples", "3")


def _dirs(root: Path) -> tuple[Path, Path]:
    return root / "kernels", root / "docs" / "kernels"


@pytest.mark.parametrize("name", ["rowsum", "layer_norm", "gemm2", "a"])
def test_good_names(name: str, tmp_path: Path) -> None:
    assert validate_name(name, tmp_path) == name


@pytest.mark.parametrize(("name", "message"), [
    ("RowSum", "must be a lower-case Python identifier"),
    ("row-sum", "must be a lower-case Python identifier"),
    ("2d", "must be a lower-case Python identifier"),
    ("_hidden", "must be a lower-case Python identifier"),
    ("", "must be a lower-case Python identifier"),
    ("class", "is a Python keyword"),
    ("pytest_kforge", "is reserved"),
    ("kforge_kernels", "is reserved"),
    ("x" * 41, "characters long"),
])
def test_bad_names(name: str, message: str) -> None:
    with pytest.raises(ScaffoldError, match=message) as info:
        validate_name(name)
    assert "\n" not in str(info.value)  # one line


def test_class_name() -> None:
    assert class_name("layer_norm") == "LayerNormSpec" and class_name("gemm2") == "Gemm2Spec"


def test_writes_the_five_files(tmp_path: Path) -> None:
    kernels, docs = _dirs(tmp_path)
    written = scaffold.scaffold("rowsum", kernels, docs)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "kernels/rowsum/spec.py", "kernels/rowsum/fuzz.py", "kernels/rowsum/versions/v0.py",
        "kernels/rowsum/README.md", "docs/kernels/rowsum.md"]
    for p in written:
        text = p.read_text()
        assert "$name" not in text and "${Class}" not in text and "rowsum" in text, p
    spec = (kernels / "rowsum" / "spec.py").read_text()
    assert "class RowsumSpec(KernelSpec):" in spec and 'name = "rowsum"' in spec and "FILL IN" in spec
    v0 = (kernels / "rowsum" / "versions" / "v0.py").read_text()
    assert 'LANGUAGE = "torch"' in v0 and "PARENT = None" in v0 and "from kforge_kernels.rowsum.spec import SPEC" in v0
    from pytest_kforge.orchestrate.learn import read_block

    devlog = (docs / "rowsum.md").read_text()
    for block in ("overview", "best", "peers", "perf"):
        assert read_block(devlog, block), block
    assert devlog.index("<!-- kforge:perf:end -->") < devlog.index("## Versions") < devlog.index(
        "### v0 (torch, parent none)")


def test_existing_kernel_needs_force(tmp_path: Path) -> None:
    kernels, docs = _dirs(tmp_path)
    scaffold.scaffold("rowsum", kernels, docs)
    spec = kernels / "rowsum" / "spec.py"
    spec.write_text("# my work\n")
    with pytest.raises(ScaffoldError, match=r"kernel 'rowsum' already exists in .*; pick another name, or pass --force"):
        scaffold.scaffold("rowsum", kernels, docs)
    assert spec.read_text() == "# my work\n"
    scaffold.scaffold("rowsum", kernels, docs, force=True)
    assert "class RowsumSpec" in spec.read_text()


def test_never_overwrites_a_users_file(tmp_path: Path) -> None:
    kernels, docs = _dirs(tmp_path)
    devlog = docs / "rowsum.md"
    devlog.parent.mkdir(parents=True)
    devlog.write_text("# my notes\n")
    (kernels / "rowsum").mkdir(parents=True)
    (kernels / "rowsum" / "README.md").write_text("mine\n")
    with pytest.raises(ScaffoldError, match="already exist, and the scaffold never overwrites your files") as info:
        scaffold.scaffold("rowsum", kernels, docs)
    assert str(devlog) in str(info.value) and "README.md" in str(info.value)
    assert devlog.read_text() == "# my notes\n" and not (kernels / "rowsum" / "spec.py").exists()  # nothing written


def test_force_refuses_to_hide_flat_versions(tmp_path: Path) -> None:
    kernels, docs = _dirs(tmp_path)
    (kernels / "rowsum").mkdir(parents=True)
    (kernels / "rowsum" / "v1.py").write_text("")
    with pytest.raises(ScaffoldError, match=r"keeps its versions beside spec.py \(v1.py\).*move them into versions/"):
        scaffold.scaffold("rowsum", kernels, docs, force=True)


def test_cli_new_kernel_and_its_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text('[tool.kforge]\nkernels_dir = "src/kernels"\n')
    monkeypatch.chdir(tmp_path / "proj" / "sub")
    assert cli.main(["new-kernel", "rowsum"]) == 0
    out = capsys.readouterr().out
    assert "pytest --kernel rowsum --kernel-version v0" in out
    # the configured kernels_dir, and the devlog beside the configuration, wherever it is run from
    assert (tmp_path / "proj" / "src" / "kernels" / "rowsum" / "versions" / "v0.py").is_file()
    assert (tmp_path / "proj" / "docs" / "kernels" / "rowsum.md").is_file()
    assert cli.main(["new-kernel", "rowsum"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kforge new-kernel: error: kernel 'rowsum' already exists") and "\n" not in err
    assert scaffold.main(["Row-Sum"]) == 2
    assert "must be a lower-case Python identifier" in capsys.readouterr().err
    assert scaffold.main(["other", "--kernels-dir", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "other" / "spec.py").is_file()


@pytest.mark.usefixtures("standalone_env", "isolated_kernels")
def test_scaffolded_kernel_suite_passes_on_cpu(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject='[tool.kforge]\nkernels_dir = "kernels"\n')
    assert scaffold.main(["rowscale"]) == 0  # pytester runs in its own folder
    spec = pytester.path / "kernels" / "rowscale" / "spec.py"
    # a user's first edit: the trial sizes
    text = spec.read_text()
    text = text.replace('"square": {"rows": 4096, "cols": 4096}', '"square": {"rows": 3, "cols": 96}')
    text = text.replace('"wide": {"rows": 256, "cols": 65536}', '"wide": {"rows": 2, "cols": 1000}')
    assert text != spec.read_text()
    spec.write_text(text)

    result = pytester.runpytest("--kernel", "rowscale", "--kernel-version", "v0", "-rs", "-v", *FAST)
    result.assert_outcomes(passed=3, skipped=2)
    out = result.stdout.str()
    for test_id in ("test_correctness[rowscale-v0-square-rows3-cols96]",  # as written: already CPU-sized
                    "test_correctness[rowscale-v0-wide-rows2-cols256]",   # cols shrunk to 256 on CPU
                    "test_fuzz[rowscale-v0]"):
        assert re.search(re.escape(test_id) + r" PASSED", out), test_id
    assert "timing rowscale v0 needs a CUDA GPU" in out

    # with the device named, the trials run on CPU (perf_counter, not device timing)
    timed = pytester.runpytest("--kernel", "rowscale:v0", "--kforge-device", "cpu", "--kforge-rounds", "3",
                               "--kforge-warmup", "0", "-k", "test_trial", *FAST)
    timed.assert_outcomes(passed=2)
