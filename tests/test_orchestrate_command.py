"""The command backend on CPU: a fake coding-agent CLI (tests/data/fake_agents/fake_agent.py) as designer and
profiler -- one good, one that breaks the contract, one that hangs, one that writes outside its allowlist."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from pathlib import Path

import pytest

from pytest_kforge import contracts as C
from pytest_kforge.orchestrate.__main__ import main
from kforge_fakes import fake_gpu_cli, toy_with_results

FAKE = Path(__file__).parent / "data" / "fake_agents" / "fake_agent.py"
TIMES = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 850.0},
         "v3": {"decode": 85.0, "spec": 1000.0}}

pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


def agent(mode: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {mode}"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_gpu_cli(monkeypatch, TIMES)
    return toy_with_results(tmp_path / "proj", TIMES)


def state_of(root: Path) -> dict:
    return json.loads(next((root / "runs").glob("*/state.json")).read_text())


def test_good_agent_cli_is_designer_and_profiler(root: Path, capsys) -> None:
    rc = main(["--kernel", "toy", "--root", str(root), "--iterations", "2", "--agents", "command",
               "--agent-cmd", agent("good")])
    out = capsys.readouterr().out
    assert rc == 0, out
    st = state_of(root)
    assert st["status"] == "done" and all(s["status"] == "done" for s in st["steps"].values())
    assert st["options"]["agent_cmd"] == agent("good") and st["options"]["kernels_dir"] == "kernels"
    assert (root / "kernels" / "toy" / "v2.py").exists() and (root / "kernels" / "toy" / "v3.py").exists()
    assert "| v2 | cutile-dsl | 80.0 | 850.0 |" in out and "| kept |" in out
    ends = [ln for ln in out.splitlines() if ln.startswith("[") and not ln.endswith("] ...")]
    assert len(ends) == 16 and all(re.search(r"\(\d+\.\d s\)$", ln) for ln in ends)  # each step's wall time
    run = next((root / "runs").glob("*/state.json")).parent
    task = C.OptimizationTask.parse((run / "tasks" / "1-DESIGN-designer" / "task.md").read_text())
    assert (task.current, task.new_version) == ("v1", "v2")
    prompt = (run / "tasks" / "1-DESIGN-designer" / "prompt.md").read_text()
    assert prompt.startswith("Create toy v2 from v1.") and "reply.md" in prompt
    ex = json.loads((run / "exchanges" / "1-DESIGN-designer.json").read_text())
    assert ex["backend"] == "command" and ex["calls"][0]["reply_from"] == "reply file"
    assert "NUM_SPLITS" in ex["files"]["kernels/toy/v2.py"]  # recorded for the replay
    prof = json.loads((run / "exchanges" / "1-PROFILE-profiler-decode.json").read_text())
    assert prof["calls"][0]["reply_from"] == "stdout" and prof["contract"]["version"] == "v1"


def test_contract_broken_on_the_first_call_gets_one_retry(root: Path) -> None:
    rc = main(["--kernel", "toy", "--root", str(root), "--iterations", "1", "--designer-cmd", agent("retry")])
    assert rc == 0
    run = next((root / "runs").glob("*/state.json")).parent
    ex = json.loads((run / "exchanges" / "1-DESIGN-designer.json").read_text())
    assert len(ex["calls"]) == 2 and ex["replies"][0].startswith("Done!")
    assert state_of(root)["steps"]["1:DESIGN"]["status"] == "done"


def test_contract_broken_twice_fails_the_step_resumably(root: Path, capsys) -> None:
    rc = main(["--kernel", "toy", "--root", str(root), "--agents", "command", "--designer-cmd", agent("broken")])
    err = capsys.readouterr().err
    assert rc == 1 and "broke the New Version contract twice" in err and "--resume" in err
    st = state_of(root)
    assert st["steps"]["1:DESIGN"]["status"] == "failed" and st["steps"]["1:PROFILE"]["status"] == "done"


def test_hanging_agent_is_killed_at_its_time_limit(root: Path, capsys) -> None:
    t0 = time.monotonic()
    rc = main(["--kernel", "toy", "--root", str(root), "--designer-cmd", agent("hang"), "--agent-timeout", "2"])
    err = capsys.readouterr().err
    assert rc == 1 and "timed out after 2 s and was killed" in err
    assert time.monotonic() - t0 < 60  # neither the agent nor its sleeping child held the run


def test_agent_writing_outside_its_allowlist_fails_and_is_undone(root: Path, capsys) -> None:
    rc = main(["--kernel", "toy", "--root", str(root), "--designer-cmd", agent("escape")])
    err = capsys.readouterr().err
    assert rc == 1 and "wrote outside its allowlist" in err
    assert "escaped.txt" in err and "kernels/toy/conftest.py" in err
    assert not (root / "escaped.txt").exists() and not (root / "kernels" / "toy" / "conftest.py").exists()
    assert state_of(root)["steps"]["1:DESIGN"]["status"] == "failed"


def test_command_backend_without_a_command_is_one_clear_line(root: Path, capsys) -> None:
    rc = main(["--kernel", "toy", "--root", str(root), "--agents", "command"])
    err = capsys.readouterr().err
    assert rc == 2 and "--agents command needs --agent-cmd" in err
