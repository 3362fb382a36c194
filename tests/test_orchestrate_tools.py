"""Agent tools: strings in, strings out, ``ERROR: ...`` instead of exceptions."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_kforge.orchestrate.agents.base import AgentContext
from kforge_fakes import FakeSuiteRunner, make_toy_project
from pytest_kforge.orchestrate.tools import TOOL_SCHEMAS, Toolbox


def box(root: Path, **kw) -> Toolbox:
    return Toolbox(AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy", step_key="1:DESIGN", **kw))


def test_tools_return_strings_and_errors(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    t = box(root)
    assert {s["name"] for s in TOOL_SCHEMAS} == {"read_file", "write_file", "run_suite", "profile_version",
                                                 "search_knowledge"}
    assert t.call("read_file", {"path": "kernels/toy/v1.py"}).startswith('LANGUAGE = "cutile-dsl"')
    assert t.call("read_file", {"path": "../etc/passwd"}).startswith("ERROR:")
    assert t.call("read_file", {"path": "kernels/toy/v9.py"}).startswith("ERROR:")
    assert t.call("write_file", {"path": "kernels/toy/v2.py", "content": "X = 1\n"}) == "wrote 6 chars to kernels/toy/v2.py"
    assert (root / "kernels" / "toy" / "v2.py").read_text() == "X = 1\n"
    for bad in ("tests/test_x.py", "pyproject.toml", "kernels/other/v1.py", "/tmp/x.py", "kernels/toy/../../x.py"):
        assert t.call("write_file", {"path": bad, "content": "x"}).startswith("ERROR:"), bad
    assert t.call("nope", {}).startswith("ERROR: there is no tool 'nope'")
    assert t.call("write_file", {"pathx": "a"}).startswith("ERROR: bad arguments for write_file")
    assert t.call("run_suite", {"version": "v1"}).startswith("ERROR: no GPU here")
    assert len(t.calls) == 12 and all(isinstance(c["output"], str) for c in t.calls)


def test_read_file_opens_gzipped_twins(tmp_path: Path) -> None:
    import gzip

    root = make_toy_project(tmp_path)
    twin = root / "reports" / "toy" / "v1" / "decode.json.gz"
    twin.parent.mkdir(parents=True)
    twin.write_bytes(gzip.compress(b'{"version": "v1"}\n'))
    t = box(root)
    assert json.loads(t.call("read_file", {"path": "reports/toy/v1/decode.json.gz"})) == {"version": "v1"}
    twin.write_bytes(b"not gzip")
    assert t.call("read_file", {"path": "reports/toy/v1/decode.json.gz"}).startswith("ERROR: reports/toy/v1/decode")
    assert t.call("profile_version", {"version": "v1"}).endswith("read reports/<kernel>/<version>/<trial>.md")


def test_run_suite_tool_with_a_runner(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    t = box(root, runner=FakeSuiteRunner({"v1": {"decode": 90.0, "spec": 800.0}}), can_profile=True,
            run_dir=tmp_path / "run")
    out = json.loads(t.call("run_suite", {"version": "v1"}))
    assert [r["median_us"] for r in out["rows"]] == [90.0, 800.0] and out["correctness_failures"] == []
    assert (tmp_path / "run" / "tool-suite-1-DESIGN-v1.json").exists()
    assert t.call("profile_version", {"version": "v1"}).startswith("ERROR: profiling produced no report")
