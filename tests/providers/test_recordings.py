"""Recordings of real HTTP provider runs, used as regression fixtures.

Each fixture in ``recordings/`` was recorded from a provider talking to the loopback server in
its real wire format (SSE, a 429 retried, parallel tool calls, thinking). Two checks per
provider: the fixture replays with no network at all, and a fresh recording of the same wire
exchange today gives the same events as the fixture (so a change in how a provider parses its
stream shows up as a divergence here). ``STEERABLE_UPDATE_RECORDINGS=1`` rewrites the fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loopback_llm import (
    LoopbackServer,
    anthropic_frames,
    json_response,
    openai_call_fragments,
    openai_frames,
    stream,
)

from steerable import Agent, AgentLoop, event_to_dict, tool
from steerable.providers._retry import RetryPolicy
from steerable.providers.anthropic import AnthropicProvider
from steerable.providers.openai import OpenAIProvider
from steerable.replay import Recorder, load_recording, replay

HERE = Path(__file__).with_name("recordings")
IGNORED = {"time", "seq", "duration", "turn_id", "parent_turn_id", "request_id"}


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def _openai_exchange(server: LoopbackServer, retry: RetryPolicy) -> Any:
    first = openai_call_fragments(0, "call_a", "read_file", '{"path": "a.txt"}')
    second = openai_call_fragments(1, "call_b", "read_file", '{"path": "b.txt"}')
    server.add(json_response(429, {"error": {"message": "slow down"}}, {"retry-after": "1"}),
               stream(openai_frames(["Reading ", "both."], reasoning=["hmm"],
                                    tool_fragments=[f for pair in zip(first, second, strict=True)
                                                    for f in pair], finish="tool_calls")),
               stream(openai_frames(["a and b ", "are read."], usage=(40, 6))))
    return OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test", model="gpt-test",
                          retry=retry, environ={})


def _anthropic_exchange(server: LoopbackServer, retry: RetryPolicy) -> Any:
    server.add(json_response(529, {"type": "error", "error": {"type": "overloaded_error",
                                                              "message": "busy"}}),
               stream(anthropic_frames(["Reading."], thinking=["let me see"],
                                       tool_uses=[("toolu_1", "read_file",
                                                   ['{"pa', 'th": "a.txt"}'])],
                                       stop_reason="tool_use")),
               stream(anthropic_frames(["a is read."], usage=(50, 5))))
    return AnthropicProvider(base_url=server.url, api_key="sk-ant-test", model="claude-test",
                             retry=retry, environ={})


EXCHANGES: dict[str, Callable[[LoopbackServer, RetryPolicy], Any]] = {
    "openai": _openai_exchange,
    "anthropic": _anthropic_exchange,
}


async def _record(path: Path, provider: Any) -> None:
    agent = Agent(name="reader", instructions="Read what you are asked to.", provider=provider,
                  model=None, tools=[read_file])
    loop = AgentLoop(agent)
    async with Recorder(loop, path):
        await loop.run_turn("read a.txt and b.txt", session_id="s1")
    await loop.aclose()
    await provider.aclose()


def _events(path: Path) -> list[dict[str, Any]]:
    # The fixtures predate MESSAGE_STATE (and so also check that such recordings replay):
    # the provider's run is compared without those events.
    return [{k: v for k, v in e.items() if k not in IGNORED} for e in load_recording(path).events
            if e["kind"] != "message_state"]


@pytest.mark.parametrize("name", sorted(EXCHANGES))
async def test_fixture_replays_with_no_network(name: str) -> None:
    fixture = HERE / f"{name}_tool_turn.jsonl"
    out = await replay(fixture)
    rec = load_recording(fixture)
    assert out.text == rec.final_text() and out.text
    kinds = [e["kind"] for e in rec.events]
    assert "llm_retry" in kinds and kinds.count("tool_exec_end") >= 1
    assert any(e.get("thinking") for e in rec.events if e["kind"] == "llm_delta")
    # The arguments streamed as the model wrote them, and replay streams them again.
    deltas = [{k: v for k, v in e.items() if k not in IGNORED} for e in rec.events
              if e["kind"] == "tool_call_delta"]
    replayed = [{k: v for k, v in event_to_dict(e).items() if k not in IGNORED}
                for e in out.events if e.kind.value == "tool_call_delta"]
    assert replayed == deltas
    assert "".join(d["arguments_delta"] for d in deltas if d["call_index"] == 0) \
        == '{"path": "a.txt"}'


@pytest.mark.parametrize("name", sorted(EXCHANGES))
async def test_todays_provider_records_the_same_run(name: str, server: LoopbackServer,
                                                   retry: RetryPolicy, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.jsonl"
    await _record(fresh, EXCHANGES[name](server, retry))
    fixture = HERE / f"{name}_tool_turn.jsonl"
    if os.environ.get("STEERABLE_UPDATE_RECORDINGS") == "1":
        fixture.write_bytes(fresh.read_bytes())
    assert _events(fresh) == _events(fixture)
    await replay(fresh)


async def test_a_recorded_run_of_the_embedded_model_replays_offline() -> None:
    # Recorded from the real embedded model (see recordings/make_local_recording.py); replaying
    # it needs neither the model nor llama.cpp.
    fixture = HERE / "local_tool_turn.jsonl"
    rec = load_recording(fixture)
    assert rec.header["agents"]["local"]["provider"] == "LocalModelProvider"
    out = await replay(fixture)
    assert out.text == rec.final_text() and "pineapple" in out.text.lower()
    ends = [e for e in out.events if e.kind.value == "tool_exec_end"]
    assert [(e.tool_name, e.content) for e in ends] == [("read_file",
                                                         "The secret word is: pineapple.")]
    # The real tool agrees with what the model was told then.
    again = await replay(fixture, tools=[read_local])
    assert again.text == out.text


@tool(read_only=True, name="read_file")
async def read_local(path: str) -> str:
    """Read a text file and return its contents."""
    return "The secret word is: pineapple."
