"""OpenAIProvider end to end through AgentLoop against the loopback server."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from loopback_llm import (
    LoopbackServer,
    html_page,
    json_response,
    openai_call_fragments,
    openai_frames,
    sse,
    stream,
)

from conftest import kinds, run_turn
from steerable import Agent, AgentLoop, EventKind, Message, TurnStatus, tool
from steerable.errors import (
    ConfigurationError,
    FatalProviderError,
    ProviderError,
    RetryableProviderError,
)
from steerable.providers import ProviderTimeouts, RetryPolicy
from steerable.providers.openai import OpenAIProvider

read_paths: list[str] = []


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a file."""
    read_paths.append(path)
    return f"contents of {path}"


def provider(server: LoopbackServer, retry: RetryPolicy, **options: object) -> OpenAIProvider:
    return OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test", model="gpt-test",
                          retry=retry, environ={}, **options)  # type: ignore[arg-type]


async def test_streams_text_deltas_usage_and_sends_the_wire_format(server, retry):
    server.add(stream(openai_frames(["Hel", "lo ", "there"], usage=(12, 3))))
    p = provider(server, retry, headers={"X-Trace": "t1"})
    result, events = await run_turn(p, "hello", instructions="Be brief.")

    assert result.status is TurnStatus.COMPLETED
    assert result.text == "Hello there"
    # Regrouped at word ends, never inside a word (a secret is never cut between deltas).
    assert [e.text for e in kinds(events, EventKind.LLM_DELTA)] == ["Hello ", "there"]
    (response,) = kinds(events, EventKind.LLM_RESPONSE)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.finish_reason == "stop"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-trace"] == "t1"
    assert request.body == {
        "model": "gpt-test", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "hello"}],
    }


async def test_parallel_tool_calls_are_assembled_from_interleaved_fragments(server, retry):
    read_paths.clear()
    first = openai_call_fragments(0, "call_a", "read_file", '{"path": "a.txt"}')
    second = openai_call_fragments(1, "call_b", "read_file", '{"path": "b.txt"}')
    interleaved = [f for pair in zip(first, second, strict=True) for f in pair]
    server.add(stream(openai_frames(tool_fragments=interleaved, finish="tool_calls")),
               stream(openai_frames(["both read"])))
    result, events = await run_turn(provider(server, retry), "read a and b", tools=[read_file])

    assert result.status is TurnStatus.COMPLETED
    assert sorted(read_paths) == ["a.txt", "b.txt"]
    ends = kinds(events, EventKind.TOOL_EXEC_END)
    assert sorted((e.call_id, e.is_error) for e in ends) == [("call_a", False), ("call_b", False)]
    sent = server.requests[1].body["messages"]
    assert sent[1] == {"role": "assistant", "tool_calls": [
        {"id": "call_a", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
        {"id": "call_b", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "b.txt"}'}}]}
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "contents of a.txt"},
        {"role": "tool", "tool_call_id": "call_b", "content": "contents of b.txt"}]
    assert server.requests[0].body["tools"] == [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file.",
        "parameters": read_file.parameters}}]


async def test_invalid_tool_arguments_become_an_error_result(server, retry):
    server.add(stream(openai_frames(tool_fragments=openai_call_fragments(
        0, "call_x", "read_file", '{"path": "a.t'), finish="tool_calls")),
        stream(openai_frames(["sorry"])))
    result, events = await run_turn(provider(server, retry), tools=[read_file])

    (end,) = kinds(events, EventKind.TOOL_EXEC_END)
    assert end.is_error
    tool_message = server.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "not valid JSON" in tool_message["content"]
    assert result.status is TurnStatus.COMPLETED


async def test_reasoning_deltas_are_thinking(server, retry):
    server.add(stream(openai_frames(["42"], reasoning=["let me ", "think"])))
    result, events = await run_turn(provider(server, retry))
    deltas = [(e.text, e.thinking) for e in kinds(events, EventKind.LLM_DELTA)]
    assert deltas == [("let me ", True), ("think", True), ("42", False)]
    assert result.text == "42"


async def test_429_with_retry_after_is_retried_and_reported(server, retry, sleeps):
    server.add(json_response(429, {"error": {"message": "slow down", "code": "rate_limit"}},
                             {"retry-after": "3"}),
               stream(openai_frames(["ok"])))
    result, events = await run_turn(provider(server, retry))

    assert result.status is TurnStatus.COMPLETED and result.text == "ok"
    (notice,) = kinds(events, EventKind.LLM_RETRY)
    assert (notice.attempt, notice.delay) == (2, 3.0)
    assert "rate limited" in notice.reason and "slow down" in notice.reason
    assert sleeps.delays == [3.0]
    order = [e.kind for e in events if e.kind in (EventKind.LLM_REQUEST, EventKind.LLM_RETRY,
                                                   EventKind.LLM_DELTA, EventKind.LLM_RESPONSE)]
    assert order == [EventKind.LLM_REQUEST, EventKind.LLM_RETRY, EventKind.LLM_DELTA,
                     EventKind.LLM_RESPONSE]


async def test_500s_back_off_with_jitter_then_give_up(server, retry, sleeps):
    server.add(*[json_response(500, {"error": {"message": "boom"}}) for _ in range(3)])
    result, events = await run_turn(provider(server, retry))

    assert result.status is TurnStatus.ERROR
    assert isinstance(result.error, RetryableProviderError)
    assert "gave up after 3 attempts" in str(result.error)
    # base 0.2 s doubling, full jitter with random() == 0.5: half of 0.2 and of 0.4
    assert sleeps.delays == [pytest.approx(0.1), pytest.approx(0.2)]
    assert [e.attempt for e in kinds(events, EventKind.LLM_RETRY)] == [2, 3]
    assert len(server.requests) == 3


async def test_401_fails_at_once_naming_the_key(server, retry, sleeps):
    server.add(json_response(401, {"error": {"message": "Incorrect API key provided"}}))
    result, events = await run_turn(provider(server, retry))

    assert isinstance(result.error, FatalProviderError) and result.error.status == 401
    assert "OPENAI_API_KEY" in str(result.error)
    assert "Incorrect API key" in str(result.error)
    assert not kinds(events, EventKind.LLM_RETRY) and sleeps.delays == []


async def test_404_names_the_model_and_base_url(server, retry):
    server.add(json_response(404, {"error": {"message": "The model does not exist"}}))
    result, _ = await run_turn(provider(server, retry))
    message = str(result.error)
    assert isinstance(result.error, FatalProviderError)
    assert "'gpt-test'" in message and f"{server.url}/v1/chat/completions" in message


@pytest.mark.parametrize("status", [200, 404])
async def test_html_page_says_check_base_url(server, retry, status):
    server.add(html_page(status))
    result, _ = await run_turn(provider(server, retry))
    assert isinstance(result.error, FatalProviderError)
    assert "HTML page" in str(result.error) and "base_url" in str(result.error)


async def test_stream_cut_after_text_is_an_error_not_a_retry(server, retry):
    frames = openai_frames(["partial ", "answer"])
    server.add(stream(frames, cut_after=2))
    result, events = await run_turn(provider(server, retry))

    assert result.status is TurnStatus.ERROR
    assert type(result.error) is ProviderError
    assert "cut mid-stream" in str(result.error) and "not retried" in str(result.error)
    assert [e.text for e in kinds(events, EventKind.LLM_DELTA)] == ["partial "]
    assert not kinds(events, EventKind.LLM_RETRY)
    assert len(server.requests) == 1


async def test_stream_cut_before_any_text_is_retried(server, retry):
    server.add(stream(openai_frames(["lost"]), cut_after=1), stream(openai_frames(["fine"])))
    result, events = await run_turn(provider(server, retry))
    assert result.text == "fine"
    assert len(kinds(events, EventKind.LLM_RETRY)) == 1


async def test_stream_without_end_is_incomplete(server, retry):
    # A clean end of the body, but no finish_reason and no [DONE]: the reply is incomplete.
    frames = openai_frames(["half"], done=False, usage=None)[:-1]
    server.add(stream(frames))
    result, _ = await run_turn(provider(server, retry))
    assert type(result.error) is ProviderError
    assert "ended before the reply was complete" in str(result.error)


async def test_invalid_json_chunk(server, retry):
    frames = openai_frames(["a"])
    frames.insert(2, sse("{not json"))
    server.add(stream(frames))
    result, _ = await run_turn(provider(server, retry))
    assert type(result.error) is ProviderError
    assert "not valid JSON" in str(result.error) and "{not json" in str(result.error)


async def test_error_chunk_inside_the_stream(server, retry):
    server.add(stream([sse({"error": {"message": "model crashed", "type": "invalid"}})]))
    result, _ = await run_turn(provider(server, retry))
    assert type(result.error) is ProviderError
    assert "model crashed" in str(result.error)


async def test_slow_first_byte_within_read_timeout_is_fine(server, retry):
    server.add(stream(openai_frames(["late"]), first_byte_delay=0.2))
    result, _ = await run_turn(provider(server, retry))
    assert result.text == "late"


async def test_first_byte_slower_than_read_timeout_is_retried(server, retry):
    server.add(stream(openai_frames(["never"]), first_byte_delay=1.0),
               stream(openai_frames(["second try"])))
    p = provider(server, retry, timeouts=ProviderTimeouts(read=0.1))
    result, events = await run_turn(p)
    assert result.text == "second try"
    (notice,) = kinds(events, EventKind.LLM_RETRY)
    assert "did not answer in time" in notice.reason


async def test_total_timeout_bounds_a_trickling_stream(server, retry):
    # The total bounds the whole attempt, connecting included: a budget that a loaded machine
    # can still connect within, and a stream (~2 s) far longer than it.
    server.add(stream(openai_frames(["a", "b", "c", "d"]), frame_delay=0.3))
    p = provider(server, retry, timeouts=ProviderTimeouts(read=5, total=1.0))
    result, _ = await run_turn(p)
    assert type(result.error) is ProviderError
    assert "total timeout (1 s)" in str(result.error)


async def test_hard_abort_closes_the_connection_within_50ms(server, retry):
    # "first " ends a word: released at once (a word is held until it ends: no secret is cut).
    server.add(stream(openai_frames(["first ", "never"]), hang_after=2))
    p = provider(server, retry)
    loop = AgentLoop(Agent(provider=p))
    sub = loop.subscribe(kinds=[EventKind.LLM_DELTA])
    handle = loop.start_turn("go", session_id="s")
    await anext(aiter(sub))  # the stream is open and has delivered text
    assert server.open_connections == 1

    started = time.monotonic()
    assert loop.interrupt_hard("s")
    result = await handle
    await server.wait_closed_connections(timeout=1.0)
    assert server.last_close is not None
    assert server.last_close - started < 0.05
    assert result.status is TurnStatus.ABORTED
    assert loop.session_messages("s") == []
    await p.aclose()


async def test_context_overflow_compresses_and_retries_once(server, retry):
    overflow = {"error": {"message": "This model's maximum context length is 8192 tokens",
                          "code": "context_length_exceeded", "type": "invalid_request_error"}}
    server.add(stream(openai_frames(["first answer"])),
               json_response(400, overflow),
               stream(openai_frames(["fits now"])))
    p = provider(server, retry)
    loop = AgentLoop(Agent(provider=p))
    sub = loop.subscribe(kinds=[EventKind.CONTEXT_COMPRESS])
    await loop.run_turn("old question", session_id="s")
    result = await loop.run_turn("new question", session_id="s")
    await p.aclose()

    assert result.status is TurnStatus.COMPLETED and result.text == "fits now"
    (compress,) = sub.drain_nowait()
    assert compress.reason == "overflow"
    assert [m["content"] for m in server.requests[2].body["messages"]] == ["new question"]
    assert loop.session_messages("s") == [Message("user", "new question"),
                                          Message("assistant", "fits now")]


async def test_overflow_twice_is_an_error(server, retry):
    overflow = {"error": {"message": "prompt exceeds the available context size"}}
    server.add(stream(openai_frames(["a"])), json_response(400, overflow),
               json_response(400, overflow))
    p = provider(server, retry)
    loop = AgentLoop(Agent(provider=p))
    await loop.run_turn("one", session_id="s")
    result = await loop.run_turn("two", session_id="s")
    await p.aclose()
    assert result.status is TurnStatus.ERROR
    assert "context window" in str(result.error)


def test_missing_key_for_openai_itself_is_refused_when_made(retry):
    with pytest.raises(ConfigurationError, match=r"no OpenAI API key.*OPENAI_API_KEY"):
        OpenAIProvider(environ={}, retry=retry)


async def test_environment_supplies_key_base_url_and_model(server, retry):
    server.add(stream(openai_frames(["env"])))
    p = OpenAIProvider(retry=retry, environ={"OPENAI_API_KEY": "sk-env", "OPENAI_MODEL": "m2",
                                             "OPENAI_BASE_URL": f"{server.url}/v1/"})
    result, _ = await run_turn(p)
    assert result.text == "env"
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    assert server.requests[0].body["model"] == "m2"
    assert "sk-env" not in repr(p)


async def test_local_server_needs_no_key(server, retry):
    server.add(stream(openai_frames(["keyless"])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", environ={}, retry=retry)
    result, _ = await run_turn(p)
    assert result.text == "keyless"
    assert "authorization" not in server.requests[0].headers


async def test_unreachable_base_url(retry, sleeps):
    async with asyncio.timeout(5):
        holder = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = holder.sockets[0].getsockname()[1]
        holder.close()
        await holder.wait_closed()
    p = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", environ={}, retry=retry)
    result, events = await run_turn(p)
    assert isinstance(result.error, RetryableProviderError)
    assert "cannot reach" in str(result.error) and "gave up after 3 attempts" in str(result.error)
    assert len(kinds(events, EventKind.LLM_RETRY)) == 2


def test_bad_base_url_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="http"):
        OpenAIProvider(base_url="localhost:11434", environ={})


async def test_connection_is_reused_across_calls(server, retry):
    server.add(stream(openai_frames(["one"])), stream(openai_frames(["two"])))
    p = provider(server, retry)
    loop = AgentLoop(Agent(provider=p))
    await loop.run_turn("a", session_id="s")
    await loop.run_turn("b", session_id="s")
    await p.aclose()
    assert server.connections_total == 1
    assert json.loads(json.dumps(server.requests[1].body))["messages"][-1]["content"] == "b"
