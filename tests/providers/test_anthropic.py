"""AnthropicProvider end to end through AgentLoop against the loopback server."""

from __future__ import annotations

import pytest
from loopback_llm import LoopbackServer, anthropic_frames, json_response, sse, stream

from conftest import kinds, run_turn
from steerable import Agent, AgentLoop, EventKind, TurnStatus, tool
from steerable.errors import ConfigurationError, FatalProviderError, ProviderError
from steerable.providers._retry import RetryPolicy
from steerable.providers.anthropic import AnthropicProvider


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
async def broken(key: str) -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def provider(server: LoopbackServer, retry: RetryPolicy) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.url, api_key="sk-ant-test", model="claude-test",
                             retry=retry, environ={})


async def test_streams_text_and_usage_with_headers(server, retry):
    server.add(stream(anthropic_frames(["Hi ", "there"], usage=(30, 4))))
    result, events = await run_turn(provider(server, retry), "hello", instructions="Be terse.")

    assert result.text == "Hi there"
    assert [e.text for e in kinds(events, EventKind.LLM_DELTA)] == ["Hi ", "there"]
    (response,) = kinds(events, EventKind.LLM_RESPONSE)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 4)
    assert response.finish_reason == "end_turn"
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body == {
        "model": "claude-test", "max_tokens": 4096, "stream": True, "system": "Be terse.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}


async def test_tool_use_blocks_and_merged_tool_results(server, retry):
    server.add(stream(anthropic_frames(
        ["Checking."], stop_reason="tool_use",
        tool_uses=[("toolu_1", "lookup", ['{"ke', 'y": "a"}']),
                   ("toolu_2", "broken", ['{"key": "b"}'])])),
        stream(anthropic_frames(["done"])))
    result, events = await run_turn(provider(server, retry), "go", tools=[lookup, broken])

    assert result.status is TurnStatus.COMPLETED
    ends = {e.call_id: e.is_error for e in kinds(events, EventKind.TOOL_EXEC_END)}
    assert ends == {"toolu_1": False, "toolu_2": True}
    messages = server.requests[1].body["messages"]
    assert messages[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a"}},
        {"type": "tool_use", "id": "toolu_2", "name": "broken", "input": {"key": "b"}}]}
    assert len(messages) == 3 and messages[2]["role"] == "user"
    first, second = messages[2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": "value of a", "is_error": False}
    assert second["tool_use_id"] == "toolu_2" and second["is_error"] is True
    assert "disk on fire" in second["content"]
    assert server.requests[0].body["tools"][0] == {
        "name": "lookup", "description": "Look a key up.", "input_schema": lookup.parameters}


async def test_thinking_deltas(server, retry):
    server.add(stream(anthropic_frames(["4"], thinking=["2+2 ", "is 4"])))
    result, events = await run_turn(provider(server, retry))
    # Cut between words (no secret is ever split), the reasoning's last word ends its block.
    assert [(e.text, e.thinking) for e in kinds(events, EventKind.LLM_DELTA)] == [
        ("2+2 ", True), ("is ", True), ("4", True), ("4", False)]
    assert result.text == "4"


async def test_overloaded_error_event_is_retried(server, retry, sleeps):
    overloaded = sse({"type": "error", "error": {"type": "overloaded_error",
                                                 "message": "Overloaded"}}, "error")
    server.add(stream([overloaded]), stream(anthropic_frames(["back"])))
    result, events = await run_turn(provider(server, retry))
    assert result.text == "back"
    (notice,) = kinds(events, EventKind.LLM_RETRY)
    assert notice.attempt == 2 and "overloaded_error" in notice.reason
    assert sleeps.delays == [0.1]


async def test_529_is_retried(server, retry):
    server.add(json_response(529, {"type": "error", "error": {"type": "overloaded_error",
                                                              "message": "Overloaded"}}),
               stream(anthropic_frames(["ok"])))
    result, _ = await run_turn(provider(server, retry))
    assert result.text == "ok"


async def test_prompt_too_long_compresses_and_retries(server, retry):
    too_long = {"type": "error", "error": {"type": "invalid_request_error",
                                           "message": "prompt is too long: 210000 tokens > 200000 maximum"}}
    server.add(stream(anthropic_frames(["one"])), json_response(400, too_long),
               stream(anthropic_frames(["two"])))
    p = provider(server, retry)
    loop = AgentLoop(Agent(provider=p))
    sub = loop.subscribe(kinds=[EventKind.CONTEXT_COMPRESS])
    await loop.run_turn("first", session_id="s")
    result = await loop.run_turn("second", session_id="s")
    await p.aclose()
    assert result.text == "two"
    assert len(sub.drain_nowait()) == 1
    assert server.requests[2].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "second"}]}]


async def test_401_names_the_key(server, retry):
    server.add(json_response(401, {"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}))
    result, _ = await run_turn(provider(server, retry))
    assert isinstance(result.error, FatalProviderError)
    assert "ANTHROPIC_API_KEY" in str(result.error) and "invalid x-api-key" in str(result.error)


def test_missing_key_is_refused_when_made(retry):
    with pytest.raises(ConfigurationError, match="no Anthropic API key"):
        AnthropicProvider(environ={}, retry=retry)


async def test_stream_without_message_stop_is_incomplete(server, retry):
    server.add(stream(anthropic_frames(["cut"], stop=False)))
    result, _ = await run_turn(provider(server, retry))
    assert type(result.error) is ProviderError
    assert "no message_stop" in str(result.error)


async def test_malformed_tool_input_is_an_error_result(server, retry):
    server.add(stream(anthropic_frames(stop_reason="tool_use",
                                       tool_uses=[("toolu_9", "lookup", ['{"key": '])])),
               stream(anthropic_frames(["sorry"])))
    result, events = await run_turn(provider(server, retry), tools=[lookup])
    (end,) = kinds(events, EventKind.TOOL_EXEC_END)
    assert end.is_error and result.status is TurnStatus.COMPLETED
    (block,) = server.requests[1].body["messages"][-1]["content"]
    assert block["is_error"] is True and "not valid JSON" in block["content"]


async def test_tool_choice_none_keeps_the_tools_listed(server, retry):
    # The last call of a turn may call no tool: the tools stay in the body (the prompt starts
    # as the earlier calls' did) and tool_choice says none.
    server.add(stream(anthropic_frames(["Checking."], stop_reason="tool_use",
                                       tool_uses=[("toolu_1", "lookup", ['{"key": "a"}'])])),
               stream(anthropic_frames(["a is known"])))
    result, _ = await run_turn(provider(server, retry), "go", tools=[lookup], max_iterations=2)
    assert result.text == "a is known"
    first, last = (r.body for r in server.requests)
    assert "tool_choice" not in first and last["tool_choice"] == {"type": "none"}
    assert last["tools"] == first["tools"]
