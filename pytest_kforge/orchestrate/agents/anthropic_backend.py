"""The anthropic backend: the Messages API with tool use (anthropic 2.x, on httpx2).

* System prompt = the body of ``agents/<name>.md`` (Claude Code subagent format: YAML front
  matter + body), sent as one text block with ``cache_control: ephemeral`` so repeated calls of
  an agent read the prefix from the prompt cache; the last tool schema carries a breakpoint too.
* The tool loop stays explicit (no SDK tool runner): every ``tool_use`` block of a turn is run by
  :class:`~pytest_kforge.orchestrate.tools.Toolbox` and all results go back in ONE user turn.
* Retries: we rely on the SDK's own retry (``max_retries``, default here 4): it retries 408, 409,
  429 and every 5xx including 529 ``overloaded_error``, with exponential backoff
  ``min(0.5 * 2**n, 8) s`` and jitter, honouring ``retry-after``/``retry-after-ms``.  No second
  retry layer, so the documented budget is the real one.
* Usage and cost per step: input, output, cache-write and cache-read tokens are summed into the
  step's context; cost uses :data:`PRICES` (USD per million tokens; override with the
  ``KFORGE_PRICES`` environment variable, a JSON object ``{"model": [input, output]}``).  Cache
  writes are billed at 1.25x input and cache reads at 0.1x input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...errors import KforgeError
from .. import compat
from ..tools import TOOL_SCHEMAS, Toolbox
from .base import AgentContext, ask_with_contract, design_prompt, expecting, profile_prompt

__all__ = ["PRICES", "MODEL_ALIASES", "DEFAULT_MODEL", "load_agent_file", "cost_usd", "price_of", "Conversation",
           "AnthropicProfiler", "AnthropicDesigner", "make_client"]

#: USD per million tokens (input, output) by model family.  ASSUMED list prices per tier (check the
#: current pricing page); a model id is priced by the first family name it contains.  Override or add
#: exact ids with KFORGE_PRICES='{"claude-sonnet-5-5": [3, 15]}'.
PRICES: dict[str, tuple[float, float]] = {
    "opus": (5.0, 25.0),
    "sonnet": (3.0, 15.0),
    "haiku": (1.0, 5.0),
}
#: agent-file ``model:`` aliases -> API model ids (the SDK marks claude-sonnet-4-5 deprecated as of 2026-11-30)
MODEL_ALIASES = {"opus": "claude-opus-5-5", "sonnet": "claude-sonnet-5-5", "haiku": "claude-haiku-5-5"}
DEFAULT_MODEL = "claude-sonnet-5-5"
_FALLBACK_PROMPTS = {
    "profiler": "You are the profiler agent of pytest-kforge. Profile the version you are given with the "
                "profile_version tool and reply with the compact profile contract in its markdown shape.",
    "kernel-designer": "You are the kernel-designer agent of pytest-kforge. Create the new version with "
                       "write_file, check it with run_suite, and reply with the New Version summary contract.",
}


def load_agent_file(root: Path, name: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of ``agents/<name>.md``; a short built-in prompt when the file is absent."""
    path = Path(root) / "agents" / f"{name}.md"
    if not path.exists():
        return {"name": name}, _FALLBACK_PROMPTS.get(name, f"You are the {name} agent.")
    text = path.read_text(encoding="utf-8")
    if text.startswith("---"):
        _, fm, body = text.split("---", 2)
        import yaml

        meta = yaml.safe_load(fm) or {}
        return (meta if isinstance(meta, dict) else {}), body.strip()
    return {"name": name}, text.strip()


def prices() -> dict[str, tuple[float, float]]:
    table = dict(PRICES)
    env = os.environ.get("KFORGE_PRICES")
    if env:
        try:
            table.update({k: (float(v[0]), float(v[1])) for k, v in json.loads(env).items()})
        except (ValueError, TypeError, IndexError, AttributeError) as exc:
            raise KforgeError(f"KFORGE_PRICES is not a JSON object of model -> [input, output] USD per million "
                              f"tokens ({exc}); fix or unset it") from exc
    return table


def price_of(model: str) -> tuple[float, float]:
    """(input, output) USD per million tokens: the exact id if listed, else its family, else zero."""
    table = prices()
    if model in table:
        return table[model]
    return next((v for k, v in table.items() if k in model), (0.0, 0.0))


def cost_usd(model: str, usage: dict[str, int]) -> float:
    pin, pout = price_of(model)
    return (usage.get("input_tokens", 0) * pin + usage.get("cache_creation_input_tokens", 0) * pin * 1.25
            + usage.get("cache_read_input_tokens", 0) * pin * 0.1 + usage.get("output_tokens", 0) * pout) / 1e6


def make_client(*, api_key: str | None = None, http_client: Any = None, max_retries: int = 4,
                base_url: str | None = None) -> Any:
    import anthropic

    kw: dict[str, Any] = {"max_retries": max_retries}
    if api_key:
        kw["api_key"] = api_key
    if http_client is not None:
        kw["http_client"] = http_client
    if base_url:
        kw["base_url"] = base_url
    return anthropic.Anthropic(**kw)


class Conversation:
    """One agent conversation: the tool loop for each user message, usage summed into the context."""

    def __init__(self, client: Any, model: str, system: str, toolbox: Toolbox, context: AgentContext, *,
                 max_turns: int = 40, max_tokens: int = 8192) -> None:
        self.client, self.model, self.toolbox, self.ctx = client, model, toolbox, context
        self.system = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        self.tools = [dict(t) for t in TOOL_SCHEMAS]
        self.tools[-1]["cache_control"] = {"type": "ephemeral"}
        self.messages: list[dict[str, Any]] = []
        self.max_turns, self.max_tokens = max_turns, max_tokens
        context.exchange.setdefault("replies", [])
        context.exchange.setdefault("turns", [])
        context.exchange["model"] = model

    def __call__(self, text: str) -> str:
        self.messages.append({"role": "user", "content": text})
        for _ in range(self.max_turns):
            msg = self.client.messages.create(model=self.model, max_tokens=self.max_tokens, system=self.system,
                                              tools=self.tools, messages=self.messages)
            self._account(msg)
            content = [b.model_dump(exclude_none=True) for b in msg.content]
            self.ctx.exchange["turns"].append({"stop_reason": msg.stop_reason, "content": content})
            self.messages.append({"role": "assistant", "content": content})
            if msg.stop_reason != "tool_use":
                reply = "\n".join(b.text for b in msg.content if getattr(b, "type", "") == "text")
                self.ctx.exchange["replies"].append(reply)
                return reply
            results = [{"type": "tool_result", "tool_use_id": b.id,
                        "content": (out := self.toolbox.call(b.name, dict(b.input))),
                        "is_error": out.startswith("ERROR:")}
                       for b in msg.content if getattr(b, "type", "") == "tool_use"]
            self.messages.append({"role": "user", "content": results})
        raise KforgeError(f"the agent used {self.max_turns} turns without a final reply; raise max_turns or "
                          f"simplify the task")

    def _account(self, msg: Any) -> None:
        u = msg.usage
        usage = {k: int(getattr(u, k, 0) or 0) for k in ("input_tokens", "output_tokens",
                                                          "cache_creation_input_tokens", "cache_read_input_tokens")}
        self.ctx.add_usage(usage, cost_usd(self.model, usage))


class _AnthropicAgent:
    agent_file = ""

    def __init__(self, client: Any = None, *, model: str | None = None, max_turns: int = 40) -> None:
        self._client = client
        self.model_override = model
        self.max_turns = max_turns
        self.name = "anthropic"

    def _conversation(self, context: AgentContext) -> Conversation:
        meta, body = load_agent_file(context.root, self.agent_file)
        model = self.model_override or str(meta.get("model") or DEFAULT_MODEL)
        model = MODEL_ALIASES.get(model, model)
        client = self._client or make_client()
        context.exchange["agent_file"] = self.agent_file
        return Conversation(client, model, body, Toolbox(context), context, max_turns=self.max_turns)


class AnthropicProfiler(_AnthropicAgent):
    agent_file = "profiler"

    def profile(self, kernel: str, version: str, trial: str, params: dict[str, int], *,
                context: AgentContext) -> Any:
        conv = self._conversation(context)
        prompt = profile_prompt(kernel, version, params)
        context.exchange["prompt"] = prompt
        return ask_with_contract(conv, prompt, expecting(compat.contracts.ProfileContract.parse, kernel, version),
                                 agent="profiler", contract="profile")


class AnthropicDesigner(_AnthropicAgent):
    agent_file = "kernel-designer"

    def design(self, task: Any, *, context: AgentContext) -> Any:
        conv = self._conversation(context)
        prompt = design_prompt(task, context.language)
        context.exchange["prompt"] = prompt
        return ask_with_contract(conv, prompt,
                                 expecting(compat.contracts.NewVersionSummary.parse, task.kernel, task.new_version),
                                 agent="kernel-designer", contract="New Version")
