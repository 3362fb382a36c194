"""PathGuard: agents write only under kernels/<kernel>/ and docs/; every escape is refused."""

from __future__ import annotations

import os

import pytest

from pytest_kforge.trust.paths import PathGuard, PathRefused


@pytest.fixture()
def guard(tmp_path):
    (tmp_path / "kernels" / "mla").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    return PathGuard.for_kernel(tmp_path, "mla")


def test_allowed_paths_resolve_inside_root(guard, tmp_path):
    assert guard.resolve_for_write("kernels/mla/v2.py") == tmp_path / "kernels" / "mla" / "v2.py"
    assert guard.resolve_for_write("./docs/knowledge/new.md") == tmp_path / "docs" / "knowledge" / "new.md"
    path = guard.write_text("docs/kernels/mla.md", "hello\n")
    assert path.read_text() == "hello\n"


@pytest.mark.parametrize("rel, why", [
    ("../outside.py", "'..'"),
    ("kernels/mla/../../tests/test_x.py", "'..'"),
    ("/etc/passwd", "absolute"),
    ("~/x.py", "absolute"),
    ("C:/x.py", "absolute"),
    ("kernels/mla\\v2.py", "backslash"),
    ("kernels/mla/v\x002.py", "NUL"),
    ("", "empty"),
    ("tests/test_cheat.py", "outside the allowed"),
    ("pytest_kforge/timing.py", "outside the allowed"),
    ("conftest.py", "outside the allowed"),
    ("pyproject.toml", "outside the allowed"),
    ("kernels/softmax/v1.py", "outside the allowed"),
    ("kernels/mla/conftest.py", "never writable"),
    ("docs/pyproject.toml", "never writable"),
    ("kernels/mla/tox.ini", "never writable"),
    ("kernels/mla/evil.pth", "never writable"),
    ("kernels/mla", "existing folder"),
])
def test_refusals(guard, rel, why):
    with pytest.raises(PathRefused, match=why) as exc:
        guard.resolve_for_write(rel)
    msg = str(exc.value)
    assert "\n" not in msg and msg.count(". ") == 0  # one sentence
    assert guard.check(rel) == msg


def test_protected_dirs_even_when_allowed_broadly(tmp_path):
    g = PathGuard(tmp_path, ("",  "tests/x", "kernels/"))
    assert g.check("kernels/mla/v1.py") is None
    assert "never writable" in g.check("kernels/mla/conftest.py")
    g2 = PathGuard(tmp_path, ("kernels/", "agents/"))
    assert g2.check("agents/profiler.md") is None  # explicitly allowed
    assert "never writable" in (PathGuard(tmp_path, ("kernels/",)).check("kernels/x/pyproject.toml") or "")


def test_symlink_escaping_is_refused(guard, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "kernels" / "mla" / "link")
    with pytest.raises(PathRefused, match="symlink"):
        guard.resolve_for_write("kernels/mla/link/v2.py")
    os.symlink(tmp_path / "tests", tmp_path / "docs" / "t")  # a link inside the root is refused too
    with pytest.raises(PathRefused, match="symlink"):
        guard.write_text("docs/t/test_evil.py", "x")
    assert not (tmp_path / "tests" / "test_evil.py").exists()


def test_symlinked_file_is_refused(guard, tmp_path):
    target = tmp_path / "pyproject.toml"
    target.write_text("[project]\n")
    os.symlink(target, tmp_path / "kernels" / "mla" / "v3.py")
    with pytest.raises(PathRefused, match="symlink"):
        guard.write_text("kernels/mla/v3.py", "boom")
    assert target.read_text() == "[project]\n"


def test_bad_types_and_kernel_names(tmp_path):
    g = PathGuard.for_kernel(tmp_path, "mla")
    with pytest.raises(PathRefused, match="string"):
        g.resolve_for_write(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="plain folder"):
        PathGuard.for_kernel(tmp_path, "../x")
