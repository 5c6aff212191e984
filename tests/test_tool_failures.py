"""Every way a tool call can fail reaches the model as one error result with a clear text,
and the turn goes on: the arguments refused (by the tool's own ``ToolError`` or anything
else), a ``ToolError`` or an exception from the run, a timeout, the tool cancelling itself,
a return value that cannot be made text. A dry run previews instead of running."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    BaseTool,
    EventKind,
    Reply,
    ScriptedProvider,
    ToolContext,
)
from steerable.errors import ToolError

K = EventKind


class Probe(BaseTool):
    """One tool whose ``validate`` and ``run`` do what the case says."""

    name = "probe"
    description = "A tool that fails on purpose."

    def __init__(self, case: str) -> None:
        self.case = case
        self.timeout = 0.05 if case == "timeout" else None

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.case == "refused":
            raise ToolError("n must be positive")
        if self.case == "invalid":
            raise KeyError("n")
        return arguments

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        if self.case == "tool_error":
            raise ToolError("the file is locked")
        if self.case == "exception":
            raise RuntimeError("boom")
        if self.case == "timeout":
            await asyncio.sleep(10)
        if self.case == "cancelled":
            raise asyncio.CancelledError
        if self.case == "not_text":
            return Unprintable()
        return "fine"


class Unprintable:
    def model_dump_json(self) -> str:
        raise ValueError("no JSON form")


CASES = [
    ("refused", True, "n must be positive"),
    ("invalid", True, "Tool 'probe' rejected its arguments: KeyError: 'n'"),
    ("tool_error", True, "the file is locked"),
    ("exception", True, "Tool 'probe' failed: RuntimeError: boom"),
    ("timeout", True, "Tool 'probe' timed out after 0.05 s and was cancelled."),
    ("cancelled", True, "Tool 'probe' was cancelled."),
    ("not_text", True, "Tool 'probe' returned a value that is not text: no JSON form"),
    ("fine", False, "fine"),
]


@pytest.mark.parametrize(("case", "is_error", "content"), CASES, ids=[c[0] for c in CASES])
async def test_a_failing_call_is_one_clear_error_result(case: str, is_error: bool,
                                                        content: str) -> None:
    provider = ScriptedProvider([Reply(tool_calls=[("probe", {"n": 1})]), Reply(text="ok")])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[Probe(case)]))
    sub = loop.subscribe([K.TOOL_EXEC_END])
    result = await loop.run_turn("go", session_id="s")
    assert result.text == "ok"
    (end,) = sub.drain_nowait()
    assert (end.call_id, end.tool_name, end.is_error, end.content) == (
        "call_1", "probe", is_error, content)
    (message,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert (message.content, message.tool_call_id) == (content, "call_1")
    await loop.aclose()


async def test_a_dry_run_previews_a_mutating_call_and_runs_a_read_only_one() -> None:
    class Reader(Probe):
        name = "reader"
        read_only = True

    provider = ScriptedProvider([Reply(tool_calls=[("probe", {"n": 1}), ("reader", {})]),
                                 Reply(text="ok")])
    loop = AgentLoop(Agent(name="a", provider=provider, dry_run=True,
                           tools=[Probe("exception"), Reader("fine")]))
    sub = loop.subscribe([K.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    got = [(e.tool_name, e.is_error, e.content) for e in sub.drain_nowait()]
    assert sorted(got) == [
        ("probe", False, '[dry-run] probe was not run; it would have been called with {"n": 1}'),
        ("reader", False, "fine")]
    await loop.aclose()


async def test_a_call_of_an_unknown_tool_starts_with_its_arguments_and_names_the_tools() -> None:
    provider = ScriptedProvider([Reply(tool_calls=[("nope", {"x": 1})]), Reply(text="ok")])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[Probe("fine")]))
    sub = loop.subscribe([K.TOOL_EXEC_START, K.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    start, end = sub.drain_nowait()
    assert (start.tool_name, start.arguments) == ("nope", {"x": 1})
    assert (end.is_error, end.content) == (True, "Unknown tool 'nope'. Available tools: probe.")
    await loop.aclose()


async def test_a_call_of_an_unknown_tool_by_an_agent_without_tools_says_there_are_none() -> None:
    provider = ScriptedProvider([Reply(tool_calls=[("nope", {})]), Reply(text="ok")])
    loop = AgentLoop(Agent(name="a", provider=provider))
    sub = loop.subscribe([K.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    (end,) = sub.drain_nowait()
    assert (end.is_error, end.content) == (True, "Unknown tool 'nope'. Available tools: none.")
    await loop.aclose()
