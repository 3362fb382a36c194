"""Hypothesis fuzzing of every parser: no exception escapes but the documented one.

Each parser is imported lazily; a test skips with a reason when its owning module (or function)
does not exist yet.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def need(module: str, *names: str):
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        pytest.skip(f"{module} does not exist yet ({exc}); its parser is fuzzed once it lands")
    for n in names:
        if not hasattr(mod, n):
            pytest.skip(f"{module}.{n} does not exist yet; its parser is fuzzed once it lands")
    return [getattr(mod, n) for n in names]


# text that looks a bit like each format, plus arbitrary unicode
def near(alphabet_words: list[str]) -> st.SearchStrategy[str]:
    word = st.sampled_from(alphabet_words) | st.text(max_size=12)
    return st.lists(word, max_size=40).map("".join) | st.text(max_size=300)


TRIGGER_WORDS = ["dram_pct", "tensor_pct", "sm_pct", " > ", " < ", ">=", "<=", "==", " and ", " or ", "not ",
                 "(", ")", "80", "12.5", "-3", "1e3", "nan", " ", "&&", "||", "!", "=", "achieved_occupancy_pct"]
CONTRACT_WORDS = ["# ", "## ", "### ", "| ", " |", "---", "\n", "- ", "1. ", "**", ":", "Kernel", "Version",
                  "Bottleneck", "Memory", "Compute", "Latency", "Stage", "Root cause", "Opportunities", "Baseline",
                  "us", "%", "b=32", "s=1", "t=4096", "h=128", "v1", "mla", "PASS", "FAIL"]
TOML_WORDS = ["[tool.kforge]\n", "kernels_dir = ", "rounds = ", "warmup = ", "peak_tflops = ", "trials = ",
              "[tool.kforge.trial_matrix.mla]\n", "decode = {b = 32, s = 1}", '"kernels"', "100", "-1", "4.3",
              '["decode"]', "\n", "=", "[", "]", "{", "}", '"', "true", "x = 1\n"]
CSV_WORDS = ['"ID"', '"Kernel Name"', '"Metric Name"', '"Metric Unit"', '"Metric Value"', ",", "\n",
             '"gpu__time_duration.sum"', '"usecond"', '"12.5"', '"1,234.5"', '"n/a"', '"dram__throughput"',
             '"%"', '"0"', '""', '"mla_kernel"']


@FUZZ
@given(text=near(TRIGGER_WORDS))
def test_trigger_parser(text):
    parse_trigger, = need("pytest_kforge.knowledge", "parse_trigger")
    error = importlib.import_module("pytest_kforge.knowledge").TriggerError
    try:
        parse_trigger(text)
    except error as exc:
        assert str(exc) and "\n" not in str(exc)


@FUZZ
@given(text=near(CONTRACT_WORDS), which=st.sampled_from(["ProfileContract", "OptimizationTask", "NewVersionSummary"]))
def test_contract_parsers(text, which):
    cls, err = need("pytest_kforge.contracts", which, "ContractError")
    try:
        cls.parse(text)
    except err as exc:
        assert str(exc)


@FUZZ
@given(body=near(TOML_WORDS), name=st.sampled_from(["pyproject.toml", "kforge.toml"]))
def test_kforge_config(body, name):
    load_config, = need("pytest_kforge.config", "load_config")
    from pytest_kforge.errors import ConfigError

    with tempfile.TemporaryDirectory() as d:
        Path(d, name).write_text(body, encoding="utf-8")
        try:
            load_config(d)
        except ConfigError as exc:
            assert str(exc) and "\n" not in str(exc)


@FUZZ
@given(text=near(CSV_WORDS))
@example(text=',"Kernel Name"\x1e0')  # a row shorter than the header (found by this test: IndexError)
def test_ncu_csv(text):
    parse_raw_csv, err = need("pytest_kforge.profile.parse", "parse_raw_csv", "NcuParseError")
    try:
        parse_raw_csv(text)
    except err as exc:
        assert str(exc)


@FUZZ
@given(text=st.text(max_size=200))
def test_path_guard_never_raises_anything_else(text):
    from pytest_kforge.trust.paths import PathGuard, PathRefused

    with tempfile.TemporaryDirectory() as d:
        g = PathGuard.for_kernel(d, "mla")
        try:
            p = g.resolve_for_write(text)
        except PathRefused as exc:
            assert "\n" not in str(exc)
        else:
            rel = p.relative_to(Path(d).resolve()).as_posix()
            assert rel.startswith(("kernels/mla/", "docs/")) and not rel.endswith("conftest.py")


@FUZZ
@given(src=st.text(max_size=300) | near(["import torch\n", "def run(x, *, y):\n", "    ", "y.copy_(x)\n",
                                          "torch.matmul(x, x)", "@", "_C = {}\n", "_C[x.data_ptr()] = y\n", "(", ")"]))
def test_static_checker_never_crashes(src):
    from pytest_kforge.trust.static import check_source

    for f in check_source(src, language="cutile-dsl"):
        assert f.rule and f.line >= 0 and "\n" not in f.message
