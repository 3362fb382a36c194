"""scripts/h200.sh: the step's time budget, cap hits said in the log, and the all step's split.

A device call ends at 600 s and a step killed there brings nothing back, so every command's cap
is cut to the step's time left; the all step (19 versions, CuTe compiles of a minute or two)
names the versions a cap hit left unfinished.  The helpers are sourced alone
(``H200_FUNCTIONS_ONLY=1``); the all step runs end to end with a fake ``python3`` on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "h200.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils timeout")


def _bash(script: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_syntax() -> None:
    res = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def _helpers(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    env = {"H200_FUNCTIONS_ONLY": "1", "KF": str(tmp_path / "kf"), "OUT": str(tmp_path / "out"), "STEP_S": "60"}
    return _bash(f"source {SCRIPT} selftest\n{textwrap.dedent(body)}", tmp_path, env)


def test_run_cuts_caps_to_the_time_left_and_says_when_it_hits_one(tmp_path: Path) -> None:
    res = _helpers(tmp_path, """
        run quick 5 true; echo "quick=$RC"
        run slow 1 sleep 20; echo "slow=$RC"
        run long 500 true; echo "long=$RC"
        DEADLINE=$((SECONDS + 20)); run late 100 true; echo "late=$RC"
        """)
    assert res.returncode == 0, res.stderr
    assert [ln for ln in res.stdout.splitlines() if "=" in ln and ":" not in ln] == \
        ["quick=0", "slow=124", "long=0", "late=125"]
    log = (tmp_path / "kf" / "selftest.log").read_text()
    assert "slow: TIME CAP HIT: killed after 1 s (rc=124)" in log
    assert "long: cap cut from 500 s to the " in log and "quick: cap cut" not in log
    assert "late: NOT RUN: " in log and " s (STEP_S), cap 100 s: true" in log and not (tmp_path / "kf" / "late.log").exists()


def test_unfinished_names_versions_without_a_finished_trial(tmp_path: Path) -> None:
    mla = tmp_path / "kernels" / "mla"
    mla.mkdir(parents=True)
    for name in ("v0", "v1", "v1_cute", "v10", "_cute_host", "fuzz", "spec"):
        (mla / f"{name}.py").write_text("")
    (tmp_path / "suite.log").write_text(
        "::test_correctness[mla-v1_cute-decode-b4-s1-t256-h128] PASSED [ 10%]\n"
        "::test_trial[mla-v0-decode-b32-s1-t4096-h128] PASSED [ 50%]\n"
        "::test_trial[mla-v1-decode-b32-s1-t4096-h128] SKIPPED (v1 is written in...) [ 60%]\n"
        "::test_trial[mla-v10-decode-b32-s1-t4096-h128] ")  # running when the cap hit
    (tmp_path / "xdist.log").write_text(  # -v under xdist: outcome first, tests of several workers interleaved
        "[gw1] [ 40%] PASSED pytest_kforge/collect.py::test_trial[mla-v1_cute-spec-b32-s16-t4096-h128] \n"
        "pytest_kforge/collect.py::test_trial[mla-v0-decode-b32-s1-t4096-h128] \n"
        "[gw0] [ 50%] FAILED pytest_kforge/collect.py::test_trial[mla-v10-decode-b32-s1-t4096-h128] \n")
    res = _helpers(tmp_path, """
        mla_versions all
        unfinished all suite.log
        unfinished v0,v1 suite.log
        unfinished v0,v10 missing.log
        unfinished all xdist.log
        """)
    assert res.stdout.splitlines() == ["v0,v1,v1_cute,v10", "v1_cute,v10", "", "v0,v10", "v0,v1"]


FAKE_PYTHON = '''#!{python}
"""python3 for the all step: pip and the doctor succeed, the suite hangs after one trial."""
import json, os, sys, time
with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["-m", "pytest"] and "--benchmark-compare" not in sys.argv:
    journal = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--kforge-json=")) + ".partial.jsonl"
    with open(journal, "a") as fh:
        fh.write(json.dumps({{"meta": {{"kernel": "mla"}}, "result": {{"version": "v0"}}}}) + "\\n")
    print("::test_trial[mla-v0-decode-b32-s1-t4096-h128] PASSED [ 33%]")
    print("::test_trial[mla-v1-decode-b32-s1-t4096-h128] ", end="", flush=True)
    time.sleep(60)
print("fake ok")
'''


def _step(tmp_path: Path, fake_python: str, step: str, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    """``bash scripts/h200.sh STEP ARGS`` in ``tmp_path`` with ``fake_python`` as python3 on PATH
    (each call's argv logged to ``argv.log``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python3"
    fake.write_text(fake_python.format(python=sys.executable))
    fake.chmod(0o755)
    (tmp_path / "argv.log").touch()
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GPU_ENV": "/dev/null",
           "FAKE_ARGV_LOG": str(tmp_path / "argv.log"), "KF": str(tmp_path / "kf"), "OUT": str(tmp_path / "out"),
           **env_extra}
    return subprocess.run(["bash", str(SCRIPT), step, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def _all_step(tmp_path: Path, *args: str) -> tuple[str, list[list[str]]]:
    res = _step(tmp_path, FAKE_PYTHON, "all", *args)
    assert res.returncode == 0, res.stdout + res.stderr
    argv_log = tmp_path / "argv.log"
    return (tmp_path / "kf" / "all.log").read_text(), [json.loads(ln) for ln in argv_log.read_text().splitlines()]


def test_all_step_names_the_versions_a_cap_left_unfinished(tmp_path: Path) -> None:
    log, argv = _all_step(tmp_path, "VERSIONS=v0,v1,v2", "BEST=v1", "SUITE_S=2", "SKIP_NCU=1")
    suite = next(a for a in argv if "--kernel-version" in a and "v0,v1,v2" in a)
    assert "-v" in suite and "--kforge-json=" + str(tmp_path / "kf" / "suite-all-v0-v2.json") in suite
    assert "suite-all-v0-v2: TIME CAP HIT: killed after 2 s (rc=124)" in log
    assert "suite-all-v0-v2: versions NOT RUN to the end (no finished trial benchmark): v1,v2" in log
    assert "run them in another call: bash scripts/h200.sh all VERSIONS=v1,v2 BEST=v1" in log
    assert any("--benchmark-compare" in a for a in argv)  # v0 and BEST are in this part: compared
    with tarfile.open(tmp_path / "out" / "kf-all.tgz") as tar:
        assert "kf/suite-all-v0-v2.not-run.txt" in tar.getnames()
    assert (tmp_path / "kf" / "suite-all-v0-v2.not-run.txt").read_text() == "v1,v2\n"
    # the finished trial's row, journalled, is turned back into the results JSON
    assert ["-m", "pytest_kforge.journal", str(tmp_path / "kf" / "suite-all-v0-v2.json.partial.jsonl"),
            str(tmp_path / "kf" / "suite-all-v0-v2.json")] in argv
    assert "-n" not in suite  # one process unless WORKERS is given


def test_all_step_with_workers_shares_the_gpu(tmp_path: Path) -> None:
    _log, argv = _all_step(tmp_path, "VERSIONS=v0,v1", "BEST=v1", "SUITE_S=2", "SKIP_NCU=1", "SKIP_COMPARE=1",
                           "WORKERS=12")
    suite = next(a for a in argv if "--kernel-version" in a and "v0,v1" in a)
    i = suite.index("-n")
    assert suite[i:i + 4] == ["-n", "12", "--kforge-workers-per-gpu", "12"]


def test_all_step_part_without_v0_and_best_skips_the_compare(tmp_path: Path) -> None:
    log, argv = _all_step(tmp_path, "VERSIONS=v1_cute,v2_cute", "BEST=v5_cute", "SUITE_S=2", "SKIP_NCU=1")
    assert "suite-compare: skipped: VERSIONS=v1_cute,v2_cute lacks v0 or BEST=v5_cute" in log
    assert not any("--benchmark-compare" in a for a in argv)
    assert "versions NOT RUN to the end (no finished trial benchmark): v1_cute,v2_cute" in log


def test_mla_versions_parts_put_the_cutile_line_first_and_slice_the_rest(tmp_path: Path) -> None:
    mla = tmp_path / "kernels" / "mla"
    mla.mkdir(parents=True)
    names = ["v0", "v1", "v2", "v10"] + [f"v{i}_cute" for i in range(1, 8)] + ["_cute_host", "spec"]
    for name in names:
        (mla / f"{name}.py").write_text("")
    res = _helpers(tmp_path, """
        mla_versions part:1/3; mla_versions part:2/3; mla_versions part:3/3
        mla_versions part:2/2
        mla_versions part:4/3 || echo "rc=$?"
        mla_versions part:1/1 || echo "rc=$?"
        mla_versions part:02/03
        mla_versions part:2/12 || echo "rc=$?"
        """)
    assert res.stdout.splitlines() == [
        "v0,v1,v2,v10", "v1_cute,v2_cute,v3_cute", "v4_cute,v5_cute,v6_cute,v7_cute",
        "v1_cute,v2_cute,v3_cute,v4_cute,v5_cute,v6_cute,v7_cute", "rc=2", "rc=2", "v1_cute,v2_cute,v3_cute",
        "rc=2"]
    assert res.stderr.count("want part:K/N") == 2 and "that part has no versions" in res.stderr


def test_all_step_expands_a_part_before_the_suite(tmp_path: Path) -> None:
    mla = tmp_path / "kernels" / "mla"
    mla.mkdir(parents=True)
    for name in ("v0", "v1", "v1_cute", "v2_cute"):
        (mla / f"{name}.py").write_text("")
    log, argv = _all_step(tmp_path, "VERSIONS=part:2/2", "SUITE_S=2", "SKIP_NCU=1", "BEST=v2_cute")
    assert "VERSIONS=part:2/2: v1_cute,v2_cute" in log
    suite = next(a for a in argv if "--kernel-version" in a)
    assert suite[suite.index("--kernel-version") + 1] == "v1_cute,v2_cute"
    assert "--kforge-json=" + str(tmp_path / "kf" / "suite-all-v1_cute-v2_cute.json") in suite
    # the compare needs v0 and BEST in the same part: judged on the expanded list
    assert "suite-compare: skipped: VERSIONS=v1_cute,v2_cute lacks v0 or BEST=v2_cute" in log


def test_all_step_refuses_a_bad_part_before_running_anything(tmp_path: Path) -> None:
    mla = tmp_path / "kernels" / "mla"
    mla.mkdir(parents=True)
    for name in ("v0", "v1_cute"):
        (mla / f"{name}.py").write_text("")
    res = _step(tmp_path, FAKE_PYTHON, "all", "VERSIONS=part:2/3")
    assert res.returncode == 2
    log = (tmp_path / "kf" / "all.log").read_text()
    assert "VERSIONS=part:2/3: that part has no versions" in log and "doctor" not in log
    assert (tmp_path / "out" / "kf-all.tgz").exists()


FAKE_PYTHON_OK = '''#!{python}
"""python3 for the flashmla step: every command succeeds and is logged with its working directory."""
import json, os, sys
with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
    fh.write(json.dumps({{"cwd": os.getcwd(), "argv": sys.argv[1:],
                          "sm100_off": os.environ.get("FLASH_MLA_DISABLE_SM100")}}) + "\\n")
'''


def _flashmla_step(tmp_path: Path, *args: str) -> tuple[int, str, list[dict]]:
    res = _step(tmp_path, FAKE_PYTHON_OK, "flashmla", *args, SKIP_SMI="1",
                KFORGE_FLASHMLA_DIR=str(tmp_path / "gpu" / "FlashMLA"))
    calls = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    return res.returncode, (tmp_path / "kf" / "flashmla.log").read_text(), calls


def test_flashmla_step_without_the_bundle_says_how_to_make_it(tmp_path: Path) -> None:
    rc, log, calls = _flashmla_step(tmp_path)
    assert rc == 2 and "flashmla: .gpu/flashmla was not carried (make it with bash scripts/flashmla_bundle.sh)" in log
    assert not any("setup.py" in c["argv"] for c in calls)


def test_flashmla_step_builds_once_then_tests_and_compares(tmp_path: Path) -> None:
    src = tmp_path / "src" / "FlashMLA"
    src.mkdir(parents=True)
    (src / "setup.py").write_text("")
    bundle = tmp_path / ".gpu" / "flashmla"
    bundle.mkdir(parents=True)
    subprocess.run(["tar", "cJf", str(bundle / "flashmla-src.tar.xz"), "-C", str(src.parent), "FlashMLA"], check=True)
    subprocess.run("sha256sum flashmla-src.tar.xz > SHA256SUMS", shell=True, cwd=bundle, check=True)
    rc, log, calls = _flashmla_step(tmp_path, "BEST=v35_cute", "COMPARE=1")
    assert rc == 0, log
    build = next(c for c in calls if "setup.py" in c["argv"])
    assert build["argv"] == ["setup.py", "build_ext", "--inplace"] and build["sm100_off"] == "1"
    assert build["cwd"] == str(tmp_path / "gpu" / "FlashMLA") and (tmp_path / "gpu" / "FlashMLA" / ".kforge-built").exists()
    assert any(c["argv"][:3] == ["-m", "pytest", "tests/test_peers.py"] and "flashmla" in c["argv"] for c in calls)
    cmp_call = next(c["argv"] for c in calls if "benchmarks.compare" in c["argv"])
    assert cmp_call[cmp_call.index("--versions") + 1] == "v35_cute" and "flashmla,flashinfer_fa3" in cmp_call
    # a second call on the same machine does not build again
    (tmp_path / "argv.log").write_text("")
    rc, _log, calls = _flashmla_step(tmp_path)
    assert rc == 0 and not any("setup.py" in c["argv"] for c in calls)


FAKE_PYTHON_SELFCHECK = '''#!{python}
"""python3 for the candidates step: the self-check exits with $FAKE_SELFCHECK_RC, everything else succeeds."""
import json, os, sys
with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["kernels/mla/tools/cute_selfcheck.py"]:
    sys.exit(int(os.environ.get("FAKE_SELFCHECK_RC", "0")))
'''


def test_candidates_step_times_only_what_the_self_check_passed(tmp_path: Path) -> None:
    res = _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=v46_cute,v36_cute", "BEST=v35_cute",
                "TRACE=sm90_seesaw_pair_c3early_trace", SKIP_SMI="1")
    assert res.returncode == 0, res.stdout + res.stderr
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    assert ["kernels/mla/tools/cute_selfcheck.py", "--versions", "v46_cute,v36_cute"] in argv
    trace = next(a for a in argv if a[:1] == ["kernels/mla/tools/cute_trace.py"])
    assert trace[-1] == "sm90_seesaw_pair_c3early_trace"
    cmp_call = next(a for a in argv if "benchmarks.compare" in a)
    assert cmp_call[cmp_call.index("--versions") + 1] == "v35_cute,v46_cute,v36_cute"
    harness = next(a for a in argv if "--kernel-version" in a)
    assert harness[harness.index("--kernel-version") + 1] == "v35_cute,v46_cute,v36_cute"
    assert harness[harness.index("-n") + 1] == "3"
    # a failed self-check: nothing is timed, and the log says why
    (tmp_path / "argv.log").write_text("")
    res = _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=v46_cute", "BEST=v35_cute", SKIP_SMI="1",
                FAKE_SELFCHECK_RC="1")
    assert res.returncode == 0, res.stdout + res.stderr
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    assert not any("benchmarks.compare" in a or "--kernel-version" in a for a in argv)
    assert "candidates: self-check rc=1: not timed" in (tmp_path / "kf" / "candidates.log").read_text()


def test_candidates_step_checks_probe_kinds_beside_best_and_times_only_versions(tmp_path: Path) -> None:
    """kind:<kind> entries go to the self-check with BEST beside them; the compare and harness get the versions."""
    res = _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=kind:sm90_seesaw_pair_stale,v46_cute",
                "BEST=v35_cute", SKIP_SMI="1")
    assert res.returncode == 0, res.stdout + res.stderr
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    assert ["kernels/mla/tools/cute_selfcheck.py", "--versions", "v35_cute,kind:sm90_seesaw_pair_stale,v46_cute"] in argv
    cmp_call = next(a for a in argv if "benchmarks.compare" in a)
    assert cmp_call[cmp_call.index("--versions") + 1] == "v35_cute,v46_cute"
    harness = next(a for a in argv if "--kernel-version" in a)
    assert harness[harness.index("--kernel-version") + 1] == "v35_cute,v46_cute"
    # only probe kinds: the self-check's timings are the comparison, nothing else is timed
    (tmp_path / "argv.log").write_text("")
    res = _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=kind:sm90_seesaw_pair_stale",
                "BEST=v35_cute", SKIP_SMI="1")
    assert res.returncode == 0, res.stdout + res.stderr
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    assert ["kernels/mla/tools/cute_selfcheck.py", "--versions", "v35_cute,kind:sm90_seesaw_pair_stale"] in argv
    assert not any("benchmarks.compare" in a or "--kernel-version" in a for a in argv)
    assert "only probe kinds" in (tmp_path / "kf" / "candidates.log").read_text()


def test_candidates_step_runs_the_named_gpu_tests_in_the_same_call(tmp_path: Path) -> None:
    res = _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=v57_cute", "BEST=v35_cute",
                "GPU_TESTS=tests/test_kernels_cute.py -k v57", SKIP_SMI="1")
    assert res.returncode == 0, res.stdout + res.stderr
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    tests = next(a for a in argv if "tests/test_kernels_cute.py" in a)
    assert tests[:5] == ["-m", "pytest", "tests/test_kernels_cute.py", "-k", "v57"]
    assert argv.index(tests) < next(i for i, a in enumerate(argv) if "benchmarks.compare" in a)
    (tmp_path / "argv.log").write_text("")
    _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=v57_cute", "BEST=v35_cute", SKIP_SMI="1")
    assert not any("pytest" in a and "tests/test_kernels_cute.py" in a
                   for a in (json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()))


def test_candidates_step_skips_the_peer_compare_when_asked_and_still_runs_the_harness(tmp_path: Path) -> None:
    res = _step(tmp_path, FAKE_PYTHON_SELFCHECK, "candidates", "VERSIONS=v59_cute", "BEST=v35_cute", "SKIP_COMPARE=1",
                SKIP_SMI="1")
    assert res.returncode == 0, res.stdout + res.stderr
    argv = [json.loads(ln) for ln in (tmp_path / "argv.log").read_text().splitlines()]
    assert not any("benchmarks.compare" in a for a in argv)
    harness = next(a for a in argv if "--kernel-version" in a)
    assert harness[harness.index("--kernel-version") + 1] == "v35_cute,v59_cute"


def test_all_step_doctor_checks_only_the_dsls_of_its_versions(tmp_path: Path) -> None:
    _log, argv = _all_step(tmp_path, "VERSIONS=v0,v1_cute,v2_cute", "SKIP_COMPARE=1", "SKIP_NCU=1", "SUITE_S=1")
    doctor = next(a for a in argv if "pytest_kforge.doctor" in a)
    assert doctor[-2:] == ["--dsl", "cute-dsl"]
    (tmp_path / "argv.log").write_text("")
    _log, argv = _all_step(tmp_path, "VERSIONS=v0,v3,v12_cute", "SKIP_COMPARE=1", "SKIP_NCU=1", "SUITE_S=1")
    assert next(a for a in argv if "pytest_kforge.doctor" in a)[-2:] == ["--dsl", "cutile-dsl,cute-dsl"]

