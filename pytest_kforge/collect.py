"""The generated tests: the plugin adds this module to the run when ``--kernel`` is given.

Three test functions, parametrized from the run's selection (see ``pytest_generate_tests``)::

    test_correctness[mla-v4-decode-b32-s1-t4096-h128]   one per version x trial config
    test_fuzz[mla-v4]                                   hypothesis over shapes, one per version
    test_trial[mla-v4-decode-b32-s1-t4096-h128]         timed benchmark, one per version x trial

On a machine without a GPU, correctness of ``torch`` versions runs on CPU with the trial configs
shrunk by ``KernelSpec.small_params`` (the ids show the shapes actually run); DSL versions and
trial benchmarks skip with a one-line reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .errors import NoGPUError

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version
    from .session import KforgeSession
    from .spec import TrialConfig


def _session(config: pytest.Config) -> KforgeSession:
    from .session import SESSION_KEY

    return config.stash[SESSION_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    ks = _session(metafunc.config)
    sel = ks.selection
    if sel is None or "kforge_case" not in metafunc.fixturenames:
        return
    name = metafunc.function.__name__
    k = sel.kernel.name
    cases: list[Any] = []
    if name == "test_fuzz":
        cases = [pytest.param((v, None), id=f"{k}-{v.name}", marks=pytest.mark.kforge_correctness)
                 for v in sel.versions]
    elif name == "test_correctness":
        for v in sel.versions:
            for t in sel.trials:
                run_t = t if ks.on_gpu else t.replaced(sel.kernel.spec.small_params(t.params))
                cases.append(pytest.param((v, run_t), id=f"{k}-{v.name}-{run_t.id}",
                                          marks=pytest.mark.kforge_correctness))
    elif name == "test_trial" and ks.bench:
        cases = [pytest.param((v, t), id=f"{k}-{v.name}-{t.id}", marks=pytest.mark.kforge_trial)
                 for v in sel.versions for t in sel.trials]
    metafunc.parametrize("kforge_case", cases)


def skip_reason(version: Version, ks: KforgeSession, params: Any, *, timing: bool) -> str | None:
    """Why ``version`` cannot run here (one line), or None."""
    missing = version.toolchain_missing()
    if missing is not None:
        return str(missing)
    if version.language != "torch" and not ks.on_gpu:
        return str(NoGPUError(f"{version.kernel} {version.name} ({version.language})"))
    if timing and not ks.on_gpu and not ks.device_explicit:
        return str(NoGPUError(f"timing {version.kernel} {version.name}"))
    if params is not None:
        why = version.supports(params)
        if why:
            return f"{version.kernel} {version.name} does not support {params}: {why}"
    return None


def test_correctness(kforge_case: tuple[Version, TrialConfig], kforge_session: KforgeSession) -> None:
    from .correctness import check_version

    version, trial = kforge_case
    reason = skip_reason(version, kforge_session, trial.params, timing=False)
    if reason:
        pytest.skip(reason)
    rep = check_version(version, trial.params, seed=kforge_session.seed, device=kforge_session.device)
    if not rep:
        pytest.fail(f"{version.kernel} {version.name} {trial.id}: {rep.message}", pytrace=False)


def test_fuzz(kforge_case: tuple[Version, None], kforge_session: KforgeSession) -> None:
    import hypothesis
    from hypothesis import strategies as st

    from .correctness import check_version

    version, _ = kforge_case
    ks = kforge_session
    reason = skip_reason(version, ks, None, timing=False)
    if reason:
        pytest.skip(reason)
    strategy = version.spec.hypothesis_params(small=not ks.on_gpu)
    if strategy is None:
        pytest.skip(f"kernel {version.kernel!r} defines no hypothesis_params(); add one to fuzz its shapes")

    # No shrinking: each example costs kernel launches (and compiles on a GPU); the failing
    # example's params and seed, printed in the message, reproduce it.
    @hypothesis.seed(ks.seed)
    @hypothesis.settings(max_examples=ks.fuzz_examples, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck),
                         phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate))
    @hypothesis.given(case=strategy, seed=st.integers(0, 2**31 - 1))
    def fuzz(case: dict[str, Any], seed: int) -> None:
        params, kwargs = case["params"], case.get("input_kwargs", {})
        why = version.supports(params)
        hypothesis.assume(why is None)
        rep = check_version(version, params, seed=seed, device=ks.device, input_kwargs=kwargs)
        assert rep, f"{version.kernel} {version.name} {params} {kwargs}: {rep.message}"

    fuzz()


def test_trial(kforge_case: tuple[Version, TrialConfig], kforge_session: KforgeSession, benchmark: Any,
               request: pytest.FixtureRequest) -> None:
    from .bench import run_trial
    from .benchadapter import extra_info, feed_fixture
    from .results import TrialResult

    version, trial = kforge_case
    ks = kforge_session
    reason = skip_reason(version, ks, trial.params, timing=True)
    if reason:
        pytest.skip(reason)
    row, res = run_trial(version, trial, ks)
    data = row.to_json()  # the hook's contract: a results-JSON row it may add keys to
    request.config.hook.pytest_kforge_trial_result(config=request.config, version=version, trial=trial,
                                                   result=data)
    row = TrialResult.from_json(data)
    ks.add_result(row)
    if res is not None:
        feed_fixture(benchmark, res.samples_s, extra_info(row, with_gpu=True), group=f"{version.kernel} {row.id}")
    for note in (row.note, row.clock_note):
        if note:
            print(f"kforge: {version.name} {trial.id}: {note}")
    if row.error:
        pytest.fail(f"{version.kernel} {version.name} {row.id}: {row.error}", pytrace=False)
