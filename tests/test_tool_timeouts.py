"""Tool timeouts: the loop-wide default, a tool's own bound over it, and the cancel a timed-out
tool receives through its ``ToolContext`` (a sync tool in a thread can only stop by looking)."""

from __future__ import annotations

import asyncio
import threading

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Reply,
    ScriptedProvider,
    Timeouts,
    ToolContext,
    tool,
)


def _loop(tools: list[object], script: list[Reply], default: float | None) -> AgentLoop:
    agent = Agent(name="t", instructions="test", provider=ScriptedProvider(script), tools=tools)
    return AgentLoop(agent, timeouts=Timeouts(tool=default))


async def test_the_default_tool_timeout_bounds_a_tool_without_its_own() -> None:
    @tool
    async def hang() -> str:
        """Hang."""
        await asyncio.sleep(30)
        return "never"

    loop = _loop([hang], [Reply(tool_calls=[("hang", {})]), Reply(text="went on")], default=0.05)
    sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_END])
    result = await asyncio.wait_for(loop.run_turn("go", session_id="s"), 10)
    assert result.text == "went on"
    (end,) = sub.drain_nowait()
    assert end.is_error and "timed out after 0.05 s" in end.content
    await loop.aclose()


async def test_a_tools_own_timeout_wins_over_the_default() -> None:
    @tool(timeout=5.0)
    async def slowish() -> str:
        """Take a little while."""
        await asyncio.sleep(0.2)
        return "finished"

    loop = _loop([slowish], [Reply(tool_calls=[("slowish", {})]), Reply(text="ok")], default=0.05)
    sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_END])
    await asyncio.wait_for(loop.run_turn("go", session_id="s"), 10)
    (end,) = sub.drain_nowait()
    assert not end.is_error and end.content == "finished"
    await loop.aclose()


async def test_a_timed_out_sync_tool_sees_its_cancel() -> None:
    saw_cancel = threading.Event()

    @tool(timeout=0.05)
    def poll(ctx: ToolContext) -> str:
        """Work until told to stop."""
        if ctx.cancelled.wait(5):
            saw_cancel.set()
        return "stopped"

    loop = _loop([poll], [Reply(tool_calls=[("poll", {})]), Reply(text="ok")], default=None)
    await asyncio.wait_for(loop.run_turn("go", session_id="s"), 10)
    assert await asyncio.to_thread(saw_cancel.wait, 5)
    await loop.aclose()
