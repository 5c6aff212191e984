"""ScriptedProvider: the public fake every test, example and benchmark uses."""

from __future__ import annotations

import pytest

from steerable import LLMRequest, Message, Reply, ScriptedProvider
from steerable.errors import ScriptExhaustedError
from steerable.providers import StreamEnd, TextDelta, ThinkingDelta, ToolCallChunk


async def collect(provider: ScriptedProvider, request: LLMRequest) -> list:
    return [c async for c in provider.stream(request)]


REQ = LLMRequest(messages=(Message("user", "hi"),))


async def test_streams_text_in_several_chunks_then_calls_then_end() -> None:
    p = ScriptedProvider([Reply(text="one two three", tool_calls=[("t", {"a": 1}), ("t", '{"b": 2}')], thinking="hmm")])
    chunks = await collect(p, REQ)
    assert isinstance(chunks[0], ThinkingDelta)
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["one ", "two ", "three"]
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.name, dict(c.arguments)) for c in calls] == [("t", {"a": 1}), ("t", {"b": 2})]
    assert len({c.id for c in calls}) == 2
    assert isinstance(chunks[-1], StreamEnd) and chunks[-1].finish_reason == "tool_calls"
    assert p.requests == [REQ]
    p.assert_consumed()


async def test_bad_json_arguments_are_marked_not_raised() -> None:
    p = ScriptedProvider([Reply(tool_calls=[("t", "{oops"), ("t", "[1]")])])
    calls = [c.call for c in await collect(p, REQ) if isinstance(c, ToolCallChunk)]
    assert "not valid JSON" in (calls[0].arguments_error or "")
    assert "must be a JSON object" in (calls[1].arguments_error or "")


async def test_callable_steps_see_the_request() -> None:
    async def echo(request: LLMRequest) -> Reply:
        return Reply(text=request.messages[-1].content.upper())

    p = ScriptedProvider([lambda r: Reply(text=str(len(r.messages))), echo])
    assert (await collect(p, REQ))[0].text == "1"
    assert (await collect(p, REQ))[0].text == "HI"


async def test_errors_exhaustion_and_unused_steps() -> None:
    p = ScriptedProvider([Reply(error=ValueError("boom")), Reply(text="left over")])
    with pytest.raises(ValueError, match="boom"):
        await collect(p, REQ)
    with pytest.raises(AssertionError, match="1 of 2 script steps were never used"):
        p.assert_consumed()
    await collect(p, REQ)
    with pytest.raises(ScriptExhaustedError, match="request #3"):
        await collect(p, REQ)


def test_bad_scripts_are_refused() -> None:
    with pytest.raises(TypeError):
        ScriptedProvider("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ScriptedProvider([42])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        Reply(delay=-1)
    with pytest.raises(TypeError):
        Reply(tool_calls=["name"])  # type: ignore[list-item]
