"""The anthropic backend through the real SDK (anthropic 2.x) against httpx2.MockTransport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

from pytest_kforge import contracts as C  # noqa: E402
from pytest_kforge.orchestrate.agents.anthropic_backend import (  # noqa: E402
    AnthropicDesigner, AnthropicProfiler, cost_usd, make_client)
from pytest_kforge.orchestrate.agents.base import AgentContext, AgentContractError  # noqa: E402
from kforge_fakes import make_toy_project  # noqa: E402

DATA = Path(__file__).parent / "data" / "transcripts"


pytestmark = pytest.mark.usefixtures("isolated_kernels")  # tests/conftest.py


class Recorder:
    """A MockTransport handler serving recorded responses in order (optionally after error statuses)."""

    def __init__(self, responses: list[dict], errors: list[int] = ()) -> None:
        self.responses = list(responses)
        self.errors = list(errors)
        self.requests: list[dict] = []

    def __call__(self, request):
        self.requests.append(json.loads(request.content))
        if self.errors:
            status = self.errors.pop(0)
            return httpx2.Response(status, headers={"retry-after-ms": "1"},
                                   json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        return httpx2.Response(200, json=self.responses.pop(0))


def client_for(handler, max_retries: int = 2):
    return make_client(api_key="test-key", max_retries=max_retries, base_url="http://127.0.0.1:9",
                       http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def load(name: str) -> list[dict]:
    return json.loads((DATA / name).read_text())["responses"]


def ctx(root: Path) -> AgentContext:
    return AgentContext(root=root, kernels_dir=root / "kernels", kernel="toy", step_key="1:PROFILE")


def test_profiler_tool_loop_caching_and_usage(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    (root / "agents").mkdir()
    (root / "agents" / "profiler.md").write_text("---\nname: profiler\ndescription: profiles\ntools: Read\n"
                                                 "model: sonnet\n---\nYou are the profiler agent. Reply with the "
                                                 "profile contract.\n")
    rec = Recorder(load("anthropic_profiler_toy_v1_decode.json"))
    c = ctx(root)
    got = AnthropicProfiler(client_for(rec)).profile("toy", "v1", "decode", {"b": 32, "s": 1, "t": 4096, "h": 128},
                                                     context=c)
    assert isinstance(got, C.ProfileContract) and got.bottleneck == "Memory" and got.opportunities[0].name == "split-kv"
    first, second = rec.requests
    assert first["model"] == "claude-sonnet-5-5"  # agent file's alias mapped to a model id
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert first["system"][0]["text"].startswith("You are the profiler agent")
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["messages"][0]["content"].startswith("Profile toy v1 at b=32, s=1, t=4096")
    # the tool ran here (no GPU, so it answers with an ERROR string) and went back in one user turn
    tool_turn = second["messages"][-1]
    assert tool_turn["role"] == "user" and tool_turn["content"][0]["tool_use_id"] == "toolu_01Prof"
    assert tool_turn["content"][0]["content"].startswith("ERROR:") and tool_turn["content"][0]["is_error"] is True
    assert second["messages"][1]["content"][1]["type"] == "tool_use"  # assistant turn kept verbatim
    assert c.usage == {"input_tokens": 1843 + 412, "output_tokens": 96 + 588,
                       "cache_creation_input_tokens": 2210, "cache_read_input_tokens": 2210}
    want = (2255 * 3.0 + 2210 * 3.0 * 1.25 + 2210 * 3.0 * 0.1 + 684 * 15.0) / 1e6
    assert c.cost_usd == pytest.approx(want) and cost_usd("claude-sonnet-5-5", c.usage) == pytest.approx(want)
    assert len(c.exchange["turns"]) == 2 and c.exchange["model"] == "claude-sonnet-5-5"
    assert c.exchange["replies"][0].startswith("## Profile: toy v1")


def test_retry_on_529_overloaded(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    rec = Recorder(load("anthropic_profiler_toy_v1_decode.json"), errors=[529])
    c = ctx(root)
    got = AnthropicProfiler(client_for(rec, max_retries=2), model="claude-haiku-5-5").profile(
        "toy", "v1", "decode", {"b": 32, "s": 1, "t": 4096, "h": 128}, context=c)
    assert got.version == "v1"
    assert len(rec.requests) == 3  # the 529, its retry, then the second turn
    assert rec.requests[0]["model"] == "claude-haiku-5-5"  # --model overrides the agent file


def test_no_retries_left_raises_the_sdk_error(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    rec = Recorder(load("anthropic_profiler_toy_v1_decode.json"), errors=[529, 529])
    with pytest.raises(anthropic.APIStatusError):
        AnthropicProfiler(client_for(rec, max_retries=1)).profile("toy", "v1", "decode", {"b": 32, "s": 1, "t": 4096},
                                                                  context=ctx(root))


def test_designer_writes_through_the_path_guard_and_contract_retry(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    responses = load("designer_toy_v2.json")
    final = responses[-1]
    broken = json.loads(json.dumps(final))
    broken["content"][0]["text"] = "## New Version: toy v2\nI changed the split count."
    rec = Recorder([responses[0], broken, final])
    task = C.OptimizationTask("toy", "v1", "v2", "Memory-bound", [C.PlannedOptimization("split-kv", "occupancy 24%")],
                              C.Constraints("<= 128 regs", ">= 24%", "tile-level (cutile-dsl)", "tile-level only"))
    c = ctx(root)
    c.language = "cutile-dsl"
    summary = AnthropicDesigner(client_for(rec)).design(task, context=c)
    assert summary.version == "v2" and summary.correctness == "PASS"
    assert (root / "kernels" / "toy" / "v2.py").read_text().startswith('"""v2: toy tiled version')
    retry_msg = rec.requests[-1]["messages"][-1]["content"]
    assert "broke the New Version contract" in retry_msg
    assert c.exchange["replies"][0].startswith("## New Version: toy v2\nI changed")


def test_designer_refused_path_reaches_the_model_as_error(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    responses = load("designer_toy_v2.json")
    evil = json.loads(json.dumps(responses[0]))
    evil["content"][1]["input"] = {"path": "tests/conftest.py", "content": "import os"}
    rec = Recorder([evil, responses[-1], responses[-1]])
    task = C.OptimizationTask("toy", "v1", "v2", "Memory-bound", [C.PlannedOptimization("split-kv", "occupancy")],
                              C.Constraints("a", "b", "c", "d"))
    c = ctx(root)
    c.language = "cutile-dsl"
    AnthropicDesigner(client_for(rec)).design(task, context=c)
    result = rec.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and result["content"].startswith("ERROR:")
    assert not (root / "tests").exists()


def test_profiler_contract_broken_twice_is_a_clear_error(tmp_path: Path) -> None:
    root = make_toy_project(tmp_path)
    bad = json.loads(json.dumps(load("anthropic_profiler_toy_v1_decode.json")[-1]))
    bad["content"][0]["text"] = "The kernel is memory-bound."
    rec = Recorder([bad, bad])
    with pytest.raises(AgentContractError, match="broke the profile contract twice"):
        AnthropicProfiler(client_for(rec)).profile("toy", "v1", "decode", {"b": 32, "s": 1, "t": 4096},
                                                   context=ctx(root))


def test_loop_with_the_anthropic_backend_records_tokens_per_step(tmp_path: Path) -> None:
    """One iteration of the loop through the real SDK: tokens and cost land in each step of state.json."""
    import re

    from kforge_fakes import FakeSuiteRunner
    from pytest_kforge.orchestrate.loop import Options, Orchestrator

    root = make_toy_project(tmp_path)
    designer_turns = load("designer_toy_v2.json")
    template = load("anthropic_profiler_toy_v1_decode.json")[-1]

    def handler(request):
        body = json.loads(request.content)
        first = body["messages"][0]["content"]
        m = re.match(r"Profile toy (v\d+) at b=32, s=(\d+), t=4096", first)
        if m:  # answer the profiler directly with a contract for what was asked
            reply = json.loads(json.dumps(template))
            params = {"b": 32, "s": int(m[2]), "t": 4096, "h": 128}
            reply["content"][0]["text"] = C.ProfileContract(
                "toy", m[1], params, [C.StageRow("main", 100.0, 30.0, 70.0, 20.0, "Memory", "low occupancy")],
                "Memory", "KV streaming. Few CTAs.", []).render()
            return httpx2.Response(200, json=reply)
        return httpx2.Response(200, json=designer_turns[0 if len(body["messages"]) == 1 else 1])

    client = client_for(handler)
    times = {"v1": {"decode": 100.0, "spec": 900.0}, "v2": {"decode": 80.0, "spec": 850.0}}
    FakeSuiteRunner(times).run_suite("toy", ["v1"], out_json=root / "reports" / "toy" / "results.json", timeout_s=1)
    st = Orchestrator(Options(kernel="toy", root=root, iterations=1, agents="anthropic"),
                      profiler=AnthropicProfiler(client), designer=AnthropicDesigner(client),
                      runner=FakeSuiteRunner(times), has_gpu=True, out=lambda _l: None).run()
    assert st.status == "done" and st.steps["1:EVALUATE"].outputs["decision"]["kept"] is True
    saved = json.loads((st.dir / "state.json").read_text())["steps"]
    assert saved["1:PROFILE"]["tokens"]["output_tokens"] == 2 * 588  # two trials, one reply each
    assert saved["1:DESIGN"]["tokens"] == {"input_tokens": 1843 + 412, "output_tokens": 96 + 588,
                                           "cache_creation_input_tokens": 2210, "cache_read_input_tokens": 2210}
    assert saved["1:DESIGN"]["cost_usd"] > 0 and saved["1:ANALYZE"]["tokens"] == {}
    assert st.totals()["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in saved.values()), abs=1e-6)
