"""pytest_kforge.xdist on CPU: fake GPU ids, a tiny in-test kernel, real xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_plugin_helpers import write_tiny

from pytest_kforge import fsutil, gpushare, xdist
from pytest_kforge.xdist import benchmark_entry, detect_gpus, gpu_lock, parallel_args

REPO = Path(__file__).resolve().parents[1]
# keep the installed entry points (core plugin, this plugin) out; load this plugin explicitly
PLUGIN_ARGS = ("-p", "no:kforge", "-p", "no:kforge_profile", "-p", "no:kforge_trust", "-p", "no:kforge_xdist",
               "-p", "pytest_kforge.xdist", "-p", "no:cacheprovider",
               "-p", "no:hypothesispytest", "-p", "no:anyio")  # the last two: faster worker start-up

TINY_SPEC = '''
from pytest_kforge.spec import KernelSpec, Tolerance

class TinySpec(KernelSpec):
    name = "tiny"
    input_names = ("x",)
    output_names = ("out",)
    trials = {"small": {"n": 3}, "big": {"n": 7}}
    default_trials = ("small", "big")
    tolerances = {"out": Tolerance(0.0, 0.0)}

    def make_inputs(self, params, *, seed, device="cpu"):
        return {"x": [float((seed + i) % 5) for i in range(params["n"])]}

    def reference(self, inputs, *, dtype=None):
        return {"out": sum(inputs["x"])}

    def flops(self, params):
        return float(params["n"])

    def min_bytes(self, params):
        return 8.0 * params["n"]

SPEC = TinySpec()
'''
TINY_VERSION = '''
LANGUAGE = "torch"
PARENT = {parent!r}
DESCRIPTION = "tiny version {name}"
CONFIG = {{}}
SLOWDOWN = {slowdown}

def run(x, *, out=None, config=None):
    return (sum(x),)
'''
CONFTEST = '''
import json, os, pytest
from pytest_kforge.xdist import kforge_store

IMPORT_CVD = os.environ.get("CUDA_VISIBLE_DEVICES")  # what the worker saw before any test ran

def pytest_addhooks(pluginmanager):  # as the core plugin does
    from pytest_kforge import hookspec
    pluginmanager.add_hookspecs(hookspec)

def pytest_addoption(parser):  # the core harness owns this option; simulated here
    parser.addoption("--kforge-json", default=None)

CONFIG = []

def pytest_configure(config):
    CONFIG.append(config)
    config._kforge_meta = {"kernel": "tiny", "gpu": None, "started": "2026-12-02T00:00:00+00:00",
                           "roofline": {"tbs": 4.3, "tflops": 790.0}}

@pytest.fixture
def import_cvd():
    return IMPORT_CVD

def pytest_runtest_logreport(report):
    # like the core: correctness records come from test reports (xdist replays them on the controller)
    if report.when == "call" and "test_correct[" in report.nodeid:
        version = report.nodeid.rsplit("[", 1)[1].rstrip("]")
        kforge_store(CONFIG[-1])[1].append(
            {"version": version, "test": report.nodeid, "passed": report.passed, "message": ""})

def pytest_sessionfinish(session):
    # the core harness writes --kforge-json itself in a one-process run
    config = session.config
    if hasattr(config, "workerinput") or config.getoption("numprocesses", None):
        return
    results, correctness, _ = kforge_store(config)
    path = config.getoption("kforge_json")
    if path:
        with open(path, "w") as fh:
            json.dump({**config._kforge_meta, "results": results, "correctness": correctness}, fh)
'''
TEST_MODULE = '''
import json, os, re, statistics
from pathlib import Path
import pytest
from pytest_kforge.registry import Registry
from pytest_kforge.xdist import kforge_store

KERNEL = Registry(Path(__file__).parent / "kernels").kernel("tiny")

def observe(request, import_cvd):
    rec = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
           "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "import_cvd": import_cvd}
    name = re.sub(r"[^A-Za-z0-9]", "_", request.node.nodeid)
    Path(os.environ["OBSERVED_DIR"], name + ".json").write_text(json.dumps(rec))

@pytest.mark.parametrize("version", ["v0", "v1"])
def test_correct(request, import_cvd, version):
    observe(request, import_cvd)
    v = KERNEL.version(version)
    inputs = KERNEL.spec.make_inputs({"n": 5}, seed=1)
    assert v.fn(**inputs)[0] == KERNEL.spec.reference(inputs)["out"]

@pytest.mark.parametrize("trial", ["small", "big"])
@pytest.mark.parametrize("version", ["v0", "v1"])
def test_trial(request, import_cvd, version, trial):
    observe(request, import_cvd)
    v = KERNEL.version(version)
    params = KERNEL.spec.trials[trial]
    inputs = KERNEL.spec.make_inputs(params, seed=0)
    correct = v.fn(**inputs)[0] == KERNEL.spec.reference(inputs)["out"]
    # deterministic "device samples", so one process and two workers must agree exactly
    samples = [params["n"] * v.module.SLOWDOWN * (1.0 + 0.01 * i) for i in range(9)]
    med = statistics.median(samples)
    floor_us = 1.0
    row = {
        "version": version, "language": v.language, "parent": v.parent, "trial": trial,
        "id": f"{trial}-n{params['n']}", "params": dict(params), "note": "", "correct": correct,
        "median_us": med, "min_us": min(samples), "iqr_us": 0.0, "spread_pct": 0.0, "rounds": len(samples),
        "tflops": KERNEL.spec.flops(params) / med / 1e6, "gbps": 0.0, "pct_floor": 100 * floor_us / med,
        "floor_us": floor_us, "error": None, "samples_us": samples}
    # like the core: the hook sees the row before it is stored (no node id in the row itself)
    request.config.hook.pytest_kforge_trial_result(config=request.config, version=v, trial=trial, result=row)
    kforge_store(request.config)[0].append(row)
'''


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = pytester.path
    kdir = root / "kernels" / "tiny"
    kdir.mkdir(parents=True)
    (kdir / "spec.py").write_text(TINY_SPEC)
    (kdir / "v0.py").write_text(TINY_VERSION.format(parent=None, name="v0", slowdown=2.0))
    (kdir / "v1.py").write_text(TINY_VERSION.format(parent="v0", name="v1", slowdown=1.0))
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_tiny.py").write_text(TEST_MODULE)
    (root / "observed").mkdir()
    monkeypatch.setenv("OBSERVED_DIR", str(root / "observed"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KFORGE_LOCK_DIR", str(root / "locks"))
    for var in ("CUDA_VISIBLE_DEVICES", "KFORGE_GPUS", "KFORGE_XDIST_GPU"):
        monkeypatch.delenv(var, raising=False)
    return root


def _observed(root: Path) -> list[dict[str, str]]:
    out = [json.loads(p.read_text()) for p in sorted((root / "observed").glob("*.json"))]
    for p in (root / "observed").glob("*.json"):
        p.unlink()
    return out


def test_two_workers_pinned_and_merged_like_one_process(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(pytester, monkeypatch)
    one = pytester.runpytest_inprocess(*PLUGIN_ARGS, "--kforge-json", "one.json")
    one.assert_outcomes(passed=6)
    assert {o["cvd"] for o in _observed(root)} == {None}  # no xdist: nothing pinned

    bench = root / "bench"
    two = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-n", "2", "--kforge-gpus", "4,5", "--kforge-json",
                                        "two.json", "--benchmark-autosave", f"--benchmark-storage=file://{bench}")
    two.assert_outcomes(passed=6)
    assert "kforge-xdist: merged 4 timings and 2 correctness records from 2 workers" in two.stdout.str()

    # each worker saw its own GPU, already when its conftest was imported (before any test)
    seen = _observed(root)
    assert len(seen) == 6 and {o["worker"] for o in seen} <= {"gw0", "gw1"}
    for o in seen:
        assert o["cvd"] == o["import_cvd"] == {"gw0": "4", "gw1": "5"}[o["worker"]], o

    a = json.loads((root / "one.json").read_text())
    b = json.loads((root / "two.json").read_text())
    assert len(a["results"]) == 4 and len(a["correctness"]) == 2
    assert b["results"] == a["results"]  # same records, same (collection) order
    assert b["correctness"] == a["correctness"]
    assert b["kernel"] == "tiny" and b["workers"]["gw0"]["gpu"] == "4" and b["workers"]["gw1"]["gpu"] == "5"

    # pytest-benchmark compatible storage, stats computed from the samples
    files = list(bench.rglob("*.json"))
    assert len(files) == 1, files
    saved = json.loads(files[0].read_text())
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(saved)
    by_name = {bm["fullname"]: bm for bm in saved["benchmarks"]}
    trial_ids = [f"test_tiny.py::test_trial[{v}-{t}]" for v in ("v0", "v1") for t in ("small", "big")]
    assert set(by_name) == set(trial_ids)
    for r in a["results"]:
        stats = by_name[f"test_tiny.py::test_trial[{r['version']}-{r['trial']}]"]["stats"]
        assert stats["rounds"] == 9
        assert stats["median"] == pytest.approx(r["median_us"] * 1e-6)
        assert stats["min"] == pytest.approx(r["min_us"] * 1e-6)

    # pytest-benchmark's own compare reads it ...
    cli = subprocess.run([sys.executable, "-m", "pytest_benchmark", "--storage", f"file://{bench}", "compare"],
                         capture_output=True, text=True, timeout=60, check=False, cwd=bench)
    assert cli.returncode == 0, cli.stderr
    assert "test_trial[v1-big]" in cli.stdout



def test_more_workers_than_gpus_is_a_one_line_usage_error(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, monkeypatch)
    res = pytester.runpytest_inprocess(*PLUGIN_ARGS, "-n", "3", "--kforge-gpus", "0,1")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = [ln for ln in res.errlines if "xdist workers" in ln]
    assert len(err) == 1 and "only 2 GPU(s)" in err[0] and "-n 2" in err[0]


def test_detect_gpus_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KFORGE_GPUS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert detect_gpus("3") == ["0", "1", "2"]
    assert detect_gpus("2,7") == ["2", "7"]
    monkeypatch.setenv("KFORGE_GPUS", "5")
    assert detect_gpus() == ["0", "1", "2", "3", "4"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,4,2")
    assert detect_gpus("2") == ["6", "4"]  # a count takes the first N visible GPUs
    with pytest.raises(pytest.UsageError, match="lists 3"):
        detect_gpus("4")
    with pytest.raises(pytest.UsageError, match="neither a count"):
        detect_gpus("0;1")


def test_auto_workers_follow_the_gpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from pytest_kforge.xdist import pytest_xdist_auto_num_workers

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake = SimpleNamespace(getoption=lambda name, default=None: "3,5,7" if name == "kforge_gpus" else default)
    assert pytest_xdist_auto_num_workers(fake) == 3  # type: ignore[arg-type]
    opts = {"kforge_gpus": "3,5,7", "kforge_workers_per_gpu": 2}
    shared = SimpleNamespace(getoption=lambda name, default=None: opts.get(name, default))
    assert pytest_xdist_auto_num_workers(shared) == 6  # type: ignore[arg-type]  # GPUs x K
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: leave -n auto to xdist (CPU count)
    none = SimpleNamespace(getoption=lambda name, default=None: default)
    assert pytest_xdist_auto_num_workers(none) is None  # type: ignore[arg-type]


def test_parallel_args() -> None:
    assert parallel_args(0) == [] and parallel_args(1) == []
    assert parallel_args(4) == ["-n", "4", "--kforge-gpus", "4"]


def test_gpu_lock_is_exclusive_per_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KFORGE_LOCK_DIR", str(tmp_path))
    with gpu_lock("0"):
        with gpu_lock("1", timeout=0.2):  # another GPU: free
            pass
        with pytest.raises(fsutil.LockTimeout), gpu_lock("0", timeout=0.2):
            pass
    with gpu_lock("0", timeout=0.2):  # released
        pass


def test_benchmark_entry_names_and_samples() -> None:
    res = {"version": "v2", "trial": "decode", "id": "decode-b32", "params": {"b": 32}, "median_us": 50.0,
           "samples_us": [49.0, 50.0, 60.0], "test": "tests/x.py::test_trial[v2-decode]"}
    e = benchmark_entry(res, "mla")
    assert e["fullname"] == res["test"] and e["name"] == "test_trial[v2-decode]"
    assert e["group"] == "mla decode-b32" and e["samples_s"] == pytest.approx([49e-6, 50e-6, 60e-6])
    bare = benchmark_entry({"version": "v2", "trial": "decode", "id": "decode-b32", "median_us": 50.0}, "mla")
    assert bare["fullname"] == "kforge::mla::v2[decode-b32]" and bare["samples_s"] == pytest.approx([50e-6])
    assert "median only" in bare["extra_info"]["kforge_samples"]


# ---- several workers sharing one GPU (--kforge-workers-per-gpu) ---------------------------------
def test_k_workers_share_one_gpu_and_too_many_is_a_usage_error(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(pytester, monkeypatch)
    res = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-n", "3", "--kforge-gpus", "1", "--kforge-workers-per-gpu",
                                        "3", "--kforge-json", "three.json")
    res.assert_outcomes(passed=6)
    assert "kforge-xdist: 3 workers sharing 1 GPU (K=3): GPU sections serialised by a file lock" in res.stdout.str()
    workers = json.loads((root / "three.json").read_text())["workers"]
    assert {w: d["gpu"] for w, d in workers.items()} == {"gw0": "0", "gw1": "0", "gw2": "0"}
    assert {o["cvd"] for o in _observed(root)} == {"0"}

    res = pytester.runpytest_inprocess(*PLUGIN_ARGS, "-n", "4", "--kforge-gpus", "1", "--kforge-workers-per-gpu", "3")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    (err,) = [ln for ln in res.errlines if "xdist workers" in ln]
    assert "at most 3 workers per GPU (--kforge-workers-per-gpu 3)" in err and "use -n 3" in err
    for bad in ("0", "x"):
        res = pytester.runpytest_inprocess(*PLUGIN_ARGS, "-n", "1", "--kforge-workers-per-gpu", bad)
        assert res.ret == pytest.ExitCode.USAGE_ERROR
        assert f"argument --kforge-workers-per-gpu: expected an integer >= 1, got '{bad}'" in res.stderr.str()
    monkeypatch.setenv("KFORGE_WORKERS_PER_GPU", "0")
    res = pytester.runpytest_inprocess(*PLUGIN_ARGS, "-n", "1")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "expected an integer >= 1, got '0'" in res.stderr.str()


def test_workers_fill_gpu_slots_round_robin(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    sent: list[str] = []

    def gateway(wid: str) -> SimpleNamespace:
        return SimpleNamespace(id=wid, remote_exec=lambda src: sent.append(src) or SimpleNamespace(waitclose=lambda: None))

    ctl = xdist._Controller(None, ["0", "1"], 2)  # type: ignore[arg-type]
    for i in range(4):
        ctl.pytest_xdist_newgateway(gateway(f"gw{i}"))
    assert ctl.assigned == {"gw0": "0", "gw1": "1", "gw2": "0", "gw3": "1"}
    assert "'KFORGE_XDIST_SHARE'] = '2'" in sent[0]
    # torch's host threads: the cores split among the 4 workers, unless the user set OMP_NUM_THREADS
    threads = max(1, (os.cpu_count() or 1) // 4)
    assert f"os.environ.setdefault('OMP_NUM_THREADS', '{threads}')" in sent[0]
    env: dict[str, str] = {"OMP_NUM_THREADS": "7"}
    exec(sent[0].replace("import os\n", "").replace("os.environ", "env"), {"env": env})
    assert env["OMP_NUM_THREADS"] == "7" and env["CUDA_VISIBLE_DEVICES"] == "0"
    with pytest.raises(RuntimeError, match="no free GPU slot"):
        ctl.pytest_xdist_newgateway(gateway("gw4"))
    del ctl.assigned["gw2"]  # a crashed worker's slot goes to its replacement
    ctl.pytest_xdist_newgateway(gateway("gw5"))
    assert ctl.assigned["gw5"] == "0"


REC_VERSION = '''
import fcntl, json, os, time

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "records its calls and its prepare calls"
CONFIG = {"tag": 1}


def _log(**rec):
    with open(os.path.join(os.environ["TRACE_DIR"], f"{os.getpid()}.jsonl"), "a") as fh:
        fh.write(json.dumps({**rec, "pid": os.getpid()}) + "\\n")


def _lock_taken():
    path = os.path.join(os.environ["KFORGE_LOCK_DIR"], f"gpu-{os.environ.get('KFORGE_XDIST_GPU')}.lock")
    if not os.path.exists(path):
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new open file: fails even if this process holds it
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def prepare(params, config):
    t0 = time.time()
    from pytest_kforge.xdist import gpu_lock

    with gpu_lock(os.environ["KFORGE_XDIST_GPU"], timeout=10):  # times out inside this process's own section
        pass
    time.sleep(0.02)
    _log(kind="prepare", t0=t0, t1=time.time(), params=dict(params), config=dict(config))


def run(x, *, y, config=None):
    t0 = time.time()
    taken = _lock_taken()
    time.sleep(0.003)
    y.copy_(x * 2 + 1)
    _log(kind="run", t0=t0, t1=time.time(), taken=taken)
    return (y,)
'''
BAD_PREPARE = '''
LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "prepare fails (a compile error)"
CONFIG = {}


def prepare(params, config):
    raise RuntimeError("prepare failed: no such tile shape")


def run(x, *, y, config=None):
    y.copy_(x * 2 + 1)
    return (y,)
'''
CORE_ARGS = ("--kernel", "tiny", "--kernel-version", "v11_rec,v12_badprep", "--kforge-device", "cpu",
             "--kforge-rounds", "5", "--kforge-warmup", "1", "--kforge-examples", "2", "-p", "no:cacheprovider")


def _core_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The core harness's tiny kernel plus a recording version and one whose prepare() raises."""
    root = write_tiny(pytester.path)
    (root / "kernels" / "tiny" / "v11_rec.py").write_text(REC_VERSION)
    (root / "kernels" / "tiny" / "v12_badprep.py").write_text(BAD_PREPARE)
    trace, locks = root / "trace", root / "locks"
    trace.mkdir()
    monkeypatch.setenv("TRACE_DIR", str(trace))
    monkeypatch.setenv("KFORGE_LOCK_DIR", str(locks))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for var in ("CUDA_VISIBLE_DEVICES", "KFORGE_GPUS", "KFORGE_XDIST_GPU", "KFORGE_XDIST_SHARE",
                "KFORGE_WORKERS_PER_GPU"):
        monkeypatch.delenv(var, raising=False)
    return trace, locks


def _trace(trace: Path) -> list[dict]:
    events = [json.loads(line) for p in sorted(trace.glob("*.jsonl")) for line in p.read_text().splitlines()]
    for p in trace.glob("*.jsonl"):
        p.unlink()
    return events


def test_shared_gpu_sections_never_overlap_and_compile_outside_the_lock(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    trace, locks = _core_project(pytester, monkeypatch)
    out = pytester.path / "suite.json"
    res = pytester.runpytest_subprocess(*CORE_ARGS, "-n", "3", "--kforge-gpus", "1", "--kforge-workers-per-gpu", "3",
                                        f"--kforge-json={out}")
    # v11_rec: 2 correctness + fuzz + 2 trials pass; v12_badprep: each of its 5 tests fails with prepare's error
    res.assert_outcomes(passed=5, failed=5)
    # where the time went, per worker in the JSON and summed in one terminal line (a section whose prepare
    # raised never reached the lock, so only v11_rec's count)
    secs = [w["gpu_sections"] for w in json.loads(out.read_text())["workers"].values() if "gpu_sections" in w]
    assert secs and sum(s["sections"] for s in secs) >= 5
    assert all("v11_rec" in h["test"] for s in secs for h in s["longest_holds"])
    res.stdout.re_match_lines([r"kforge-xdist: \d+ GPU sections, summed over workers: \d+ s compiling outside the "
                               r"lock \(prepare\), \d+ s waiting for it, \d+ s holding it; longest hold .*v11_rec"])
    failed = [ln for ln in res.outlines if ln.startswith("FAILED")]
    assert len(failed) == 5 and all("v12_badprep" in ln and "RuntimeError: prep" in ln for ln in failed), failed
    assert res.stdout.str().count("RuntimeError: prepare failed: no such tile shape") >= 5
    assert (locks / "gpu-0.lock").exists()

    events = _trace(trace)
    runs = [e for e in events if e["kind"] == "run"]
    prepares = [e for e in events if e["kind"] == "prepare"]
    assert len({e["pid"] for e in runs}) >= 2 and all(e["taken"] for e in runs)
    overlaps = [(a, b) for a in runs for b in runs if a["pid"] != b["pid"] and a["t0"] < b["t1"] and b["t0"] < a["t1"]]
    assert not overlaps, overlaps[:2]
    # prepare ran in every section (outside the lock: its own probe of the lock succeeded), with the CONFIG
    assert {e["pid"] for e in prepares} == {e["pid"] for e in runs}
    assert {256, 4096} <= {e["params"]["n"] for e in prepares} and len(prepares) >= 5
    assert all(e["config"] == {"tag": 1} for e in prepares)


def test_unshared_runs_take_no_lock_and_never_call_prepare(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    trace, locks = _core_project(pytester, monkeypatch)
    for extra in ((), ("-n", "2", "--kforge-gpus", "0,1")):
        res = pytester.runpytest_subprocess(*CORE_ARGS, *extra)
        res.assert_outcomes(passed=10)  # the harness never calls v12_badprep's prepare
        assert "sharing" not in res.stdout.str()
        events = _trace(trace)
        assert events and {e["kind"] for e in events} == {"run"} and not any(e["taken"] for e in events)
    assert not locks.exists()


def test_gpu_section_is_a_no_op_unless_shared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import SimpleNamespace

    calls: list[tuple[dict, dict]] = []
    version = SimpleNamespace(module=SimpleNamespace(prepare=lambda p, c: calls.append((p, c))), config={"a": 1})
    monkeypatch.setenv("KFORGE_LOCK_DIR", str(tmp_path))
    before = gpushare.section_summary()
    for pinned, share in ((None, "3"), ("0", None), ("0", "1")):
        for var, val in (("KFORGE_XDIST_GPU", pinned), ("KFORGE_XDIST_SHARE", share)):
            monkeypatch.delenv(var, raising=False) if val is None else monkeypatch.setenv(var, val)
        with gpushare.gpu_section(version, {"n": 1}):  # type: ignore[arg-type]
            pass
    assert calls == [] and not list(tmp_path.iterdir())

    monkeypatch.setenv("KFORGE_XDIST_GPU", "0")
    monkeypatch.setenv("KFORGE_XDIST_SHARE", "2")
    with gpushare.gpu_section(version, {"n": 1}), pytest.raises(fsutil.LockTimeout), \
            gpu_lock("0", timeout=0.1):  # type: ignore[arg-type]  # held by the section
        pass
    assert calls == [({"n": 1}, {"a": 1})]
    summary = gpushare.section_summary()  # the shared section is counted; the unshared ones were not
    assert summary["sections"] == before["sections"] + 1 and summary["held_s"] >= before["held_s"] + 0.1
    assert summary["longest_holds"]
    monkeypatch.setattr(gpushare, "LOCK_TIMEOUT_S", 0.1)
    with gpu_lock("0"), pytest.raises(fsutil.LockTimeout, match="waited more than .* for GPU 0, which it shares"), \
            gpushare.gpu_section(version, {"n": 1}):  # type: ignore[arg-type]
        pass


def test_sections_line_sums_workers_and_names_the_longest_hold() -> None:
    w = {"gw0": {"gpu_sections": {"sections": 3, "prepare_s": 10.0, "wait_s": 20.4, "held_s": 5.0,
                                  "longest_holds": [{"test": "t::a", "held_s": 4.0}]}},
         "gw1": {"gpu_sections": {"sections": 2, "prepare_s": 1.0, "wait_s": 0.0, "held_s": 9.0,
                                  "longest_holds": [{"test": "t::b", "held_s": 8.5}]}},
         "gw2": {"results": 0, "error": "crashed"}}
    assert xdist._sections_line(w) == ("kforge-xdist: 5 GPU sections, summed over workers: 11 s compiling outside "
                                       "the lock (prepare), 20 s waiting for it, 14 s holding it; longest hold 8.5 s "
                                       "(t::b)")
    assert xdist._sections_line({"gw0": {"results": 1}}) == ""
