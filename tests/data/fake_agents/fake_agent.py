"""A fake coding-agent CLI for the command backend's tests: ``fake_agent.py MODE``.

It reads the KFORGE_* environment the orchestrator sets and behaves per MODE:

* ``good``    -- designer: writes the version file (the parent's CONFIG with NUM_SPLITS doubled) and the
  NewVersionSummary to $KFORGE_REPLY_FILE; profiler: prints a compact profile contract on stdout;
* ``broken``  -- prints text that is no contract, every time;
* ``retry``   -- broken on the first call, good when the prompt carries the parse error;
* ``hang``    -- starts a child that sleeps, then sleeps itself (the run must kill both);
* ``escape``  -- does the good work but also writes outside the allowlist.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from pytest_kforge import contracts as C

MODE = sys.argv[1]
ENV = os.environ
ROOT = Path(ENV["KFORGE_ROOT"])


def design() -> None:
    task = C.OptimizationTask.parse(Path(ENV["KFORGE_TASK_FILE"]).read_text())
    parent = ROOT / "kernels" / task.kernel / f"{task.current}.py"
    cfg = {}
    for node in ast.parse(parent.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CONFIG":
            cfg = ast.literal_eval(node.value)
    new = {**cfg, "NUM_SPLITS": cfg.get("NUM_SPLITS", 1) * 2}
    Path(ENV["KFORGE_VERSION_FILE"]).write_text(
        f'LANGUAGE = "cutile-dsl"\nPARENT = {task.current!r}\nDESCRIPTION = "fake agent: more splits"\n'
        f"CONFIG = {new!r}\n\n\ndef run(x, *, y, config=None):\n    y.append(dict(config or {{}}))\n    return (y,)\n")
    opt = task.optimizations[0].name
    s = C.NewVersionSummary(task.kernel, task.new_version,
                            [f"{opt}: NUM_SPLITS {cfg.get('NUM_SPLITS')} -> {new['NUM_SPLITS']}"],
                            [f"kernels/{task.kernel}/{task.new_version}.py"], [], "PASS",
                            [C.TrialCheck(32, 1, 4096, "decode default"), C.TrialCheck(32, 16, 4096, "spec default")],
                            f"docs/kernels/{task.kernel}.md")
    Path(ENV["KFORGE_REPLY_FILE"]).write_text(s.render())


def profile() -> None:
    prompt = Path(ENV["KFORGE_PROMPT_FILE"]).read_text()
    params = {k: int(v) for k, v in re.findall(r"\b([a-z])=(\d+)", prompt.splitlines()[0])}
    us = 100.0 if params.get("s", 1) == 1 else 900.0
    print(C.ProfileContract(ENV["KFORGE_KERNEL"], ENV["KFORGE_VERSION"], params,
                            [C.StageRow("main", us, 30.0, 78.0, 24.0, "Memory", "low occupancy")], "Memory",
                            "KV streaming at 78% of DRAM peak. Too few CTAs to hide latency.",
                            [C.Opportunity("split-kv", 25.0, "achieved_occupancy_pct=24")]).render())


def good() -> None:
    design() if ENV["KFORGE_AGENT"] == "kernel-designer" else profile()


if MODE == "good":
    good()
elif MODE == "broken":
    print("I made it faster, trust me.")
elif MODE == "retry":
    if Path(ENV["KFORGE_PROMPT_FILE"]).read_text().startswith("Your reply broke"):
        good()
    else:
        print("Done! (no contract here)")
elif MODE == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    time.sleep(120)
elif MODE == "escape":
    good()
    (ROOT / "escaped.txt").write_text("outside the allowlist")
    (ROOT / "kernels" / ENV["KFORGE_KERNEL"] / "conftest.py").write_text("# a protected name inside the kernel folder")
else:
    sys.exit(f"unknown mode {MODE}")
