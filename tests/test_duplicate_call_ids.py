"""A provider that repeats a tool-call id in one response (some local servers number every
response's calls from zero): each call still gets its own id, its own terminal event and its
own result, so the history never pairs two results with one call."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from steerable import Agent, AgentLoop, EventKind, ToolCall, tool
from steerable.providers import Chunk, LLMRequest, StreamEnd, TextDelta, ToolCallChunk
from tests.conftest import assert_history_consistent


class RepeatingIds:
    """Answers the first call with two calls that share one id, then with text."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        self.calls += 1
        if self.calls == 1:
            yield ToolCallChunk(ToolCall("call_0", "echo", {"text": "a"}))
            yield ToolCallChunk(ToolCall("call_0", "echo", {"text": "b"}))
            yield StreamEnd(None, "tool_calls")
        else:
            yield TextDelta("done")
            yield StreamEnd(None, "stop")

    async def aclose(self) -> None:
        return None


@tool(read_only=True)
def echo(text: str) -> str:
    """Echo."""
    return text


async def test_repeated_call_ids_are_made_unique() -> None:
    loop = AgentLoop(Agent(name="t", instructions="test", provider=RepeatingIds(), tools=[echo]))
    sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_END])
    result = await loop.run_turn("go", session_id="s")
    assert result.text == "done"
    ends = sub.drain_nowait()
    assert len({e.call_id for e in ends}) == 2
    saved = loop.session_messages("s")
    assert_history_consistent(saved)
    results = {m.tool_call_id: m.content for m in saved if m.role == "tool"}
    assert sorted(results.values()) == ["a", "b"]
    await loop.aclose()
