"""A provider error that echoes the API key never shows it: not in the result, the events,
the retry notices, nor the debug recorder's file (which is the owner's alone)."""

from __future__ import annotations

import stat
from pathlib import Path

from loopback_llm import LoopbackServer, json_response, openai_frames, stream

from steerable import Agent, AgentLoop, EventKind, event_to_dict
from steerable.providers import RetryPolicy
from steerable.providers.openai import OpenAIProvider

KEY = "sk-live-echoed-0123456789abcdef"


async def test_an_echoed_key_is_redacted_everywhere(server: LoopbackServer, retry: RetryPolicy,
                                                    tmp_path: Path) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "x"}}
    server.add(json_response(500, echo), json_response(401, echo))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", api_key=KEY, model="m", retry=retry,
                              environ={})
    log = tmp_path / "events.jsonl"
    loop = AgentLoop(Agent(provider=provider), record_events=log)
    sub = loop.subscribe()
    result = await loop.run_turn("hi", session_id="s")
    await loop.aclose()
    await provider.aclose()
    events = sub.drain_nowait()
    assert [e.kind for e in events if e.kind is EventKind.LLM_RETRY]  # the 500 was retried
    assert "Incorrect API key provided: [redacted]" in str(result.error)
    assert KEY not in str(result.error)
    assert not [e for e in events if KEY in str(event_to_dict(e))]
    text = log.read_text()
    assert "[redacted]" in text and KEY not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


async def test_the_recorder_redacts_tool_output_and_tightens_an_existing_file(
    server: LoopbackServer, retry: RetryPolicy, tmp_path: Path, monkeypatch
) -> None:
    from steerable import tool

    monkeypatch.setenv("MY_SERVICE_TOKEN", "plain-looking-service-token")

    @tool(read_only=True)
    def leak() -> str:
        """Print secrets."""
        return "env: MY_SERVICE_TOKEN=plain-looking-service-token ghp_abcdefghijklmnopqrstuvwxyz0123"

    server.add(stream(openai_frames(tool_fragments=[
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "leak", "arguments": "{}"}}],
        finish="tool_calls")), stream(openai_frames(["done"])))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", api_key="k", model="m", retry=retry,
                              environ={})
    log = tmp_path / "events.jsonl"
    log.write_text("")
    log.chmod(0o644)
    loop = AgentLoop(Agent(provider=provider, tools=[leak]), record_events=log)
    await loop.run_turn("hi", session_id="s")
    await loop.aclose()
    await provider.aclose()
    text = log.read_text()
    assert "tool_exec_end" in text
    assert "plain-looking-service-token" not in text and "ghp_" not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
