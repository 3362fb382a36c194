"""Trial benchmarks on CPU (``--kforge-device cpu``: perf_counter, labelled NOT device timing)."""

from __future__ import annotations

import json

import pytest

from test_plugin_helpers import write_tiny

pytestmark = pytest.mark.usefixtures("standalone_env")

CPU = ("--kforge-device", "cpu", "--kforge-rounds", "20", "--kforge-warmup", "2", "--kforge-examples", "2")


def test_trial_feeds_results_json_and_pytest_benchmark(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    res_json = pytester.path / "suite.json"
    bench_json = pytester.path / "bench.json"
    result = pytester.runpytest("--kernel", "tiny:v0", *CPU, "--kforge-json", str(res_json),
                                "--benchmark-json", str(bench_json))
    result.assert_outcomes(passed=5)
    rows = {r["id"]: r for r in json.loads(res_json.read_text())["results"]}
    assert set(rows) == {"small-n256", "big-n4096"}
    row = rows["big-n4096"]
    assert row["correct"] is True and row["error"] is None and row["rounds"] == 20
    assert row["clock"] == "cpu perf_counter (host time, NOT device timing)"
    assert row["min_us"] <= row["median_us"] and row["pct_floor"] == pytest.approx(
        100 * row["floor_us"] / row["median_us"])
    assert row["floor_us"] == pytest.approx(8 * 4096 / 4.3e12 * 1e6)
    bench = {b["param"]: b for b in json.loads(bench_json.read_text())["benchmarks"]}
    stats = bench["tiny-v0-big-n4096"]["stats"]
    # the stored figures are the harness's samples, not pytest-benchmark's own timing
    assert stats["rounds"] == 20 and stats["median"] * 1e6 == pytest.approx(row["median_us"], rel=1e-9)
    assert stats["min"] * 1e6 == pytest.approx(row["min_us"], rel=1e-9)
    extra = bench["tiny-v0-big-n4096"]["extra_info"]
    assert {"tflops", "gbps", "pct_floor", "floor_us", "median_us", "spread_pct", "params", "note", "gpu",
            "driver", "torch", "cuda_tile", "cutlass_dsl"} <= set(extra)
    assert json.loads(bench_json.read_text())["machine_info"]["gpu"] == "none (cpu)"


def test_time_below_roofline_floor_is_rejected(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    result = pytester.runpytest("--kernel", "tiny:v0", "--trial", "small", *CPU, "--kforge-no-bench",
                                "--kforge-peak-tbs", "1e-9")
    result.assert_outcomes(passed=2)  # correctness does not care about the roofline
    result = pytester.runpytest("--kernel", "tiny:v0", "--trial", "small", *CPU, "--kforge-peak-tbs", "1e-9",
                                "-k", "trial")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*tiny v0 small-n256: measured * us is below the roofline floor of * us "
                                 "(minus 10%): a measurement error or skipped work, not a result*"])


def test_work_left_running_off_the_timed_stream_is_flagged(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v8_thread",))
    result = pytester.runpytest("--kernel", "tiny:v8_thread", "--trial", "small", *CPU, "-k", "trial")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the work ran outside the timed stream (a side stream or thread not joined "
                                 "back)*"])


def test_out_of_memory_halves_and_says_so(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path, ("v9_oom",))
    out = pytester.path / "suite.json"
    result = pytester.runpytest("--kernel", "tiny:v9_oom", "--trial", "big", *CPU, "-k", "trial", "-s",
                                "--kforge-json", str(out))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*kforge: v9_oom big-n4096: n halved from 4096 to 1024: out of GPU memory"])
    (row,) = json.loads(out.read_text())["results"]
    assert row["id"] == "big-n1024" and row["note"] == "n halved from 4096 to 1024: out of GPU memory"


def test_benchmark_compare_works_on_saved_runs(pytester: pytest.Pytester) -> None:
    write_tiny(pytester.path)
    store = f"file://{pytester.path / 'bstore'}"
    for _ in range(2):
        pytester.runpytest("--kernel", "tiny:v0", "--trial", "small", *CPU, "-k", "trial",
                           "--benchmark-autosave", "--benchmark-storage", store).assert_outcomes(passed=1)
    result = pytester.runpytest("--kernel", "tiny:v0", "--trial", "small", *CPU, "-k", "trial",
                                "--benchmark-storage", store, "--benchmark-compare",
                                "--benchmark-compare-fail", "median:10000%")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_trial[[]tiny-v0-small-n256[]] (0002_*"])
    result.stdout.fnmatch_lines(["*test_trial[[]tiny-v0-small-n256[]] (NOW)*"])


def test_work_skipped_during_timing_is_caught_after_timing(pytester: pytest.Pytester) -> None:
    """A cache keyed by input pointer passes fresh-input correctness but not the in-place re-check."""
    write_tiny(pytester.path, ("v10_ptrcache",))
    result = pytester.runpytest("--kernel", "tiny:v10_ptrcache", "--trial", "small", *CPU, "-k", "test_trial")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*after timing, with * written into the timed input buffers*"
                                 "the timed rounds did not do the work*"])
