"""Every event of a busy turn names that turn, its session and (for tools) its call; a child's
events name the child and its parent; sequence numbers only grow."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from steerable.errors import ContextOverflowError
from tests.conftest import of, wait_for

K = EventKind


@tool(read_only=True)
def look(path: str, ctx: ToolContext) -> str:
    """Look (a sync tool: it runs in a worker thread, and reports progress from there)."""
    ctx.progress(f"looking at {path}", path=path)
    time.sleep(0.02)
    return f"saw {path}"


@tool
async def write(path: str) -> str:
    """Write."""
    await asyncio.sleep(0.01)
    return f"wrote {path}"


async def test_every_event_of_a_busy_turn_names_its_turn_session_and_call() -> None:
    kid = Agent(name="kid", description="a kid", tools=[look], provider=ScriptedProvider(
        [Reply(tool_calls=[("look", {"path": "k"})]), Reply(text="kid done")]))
    gate = asyncio.Event()

    async def held(request: Any) -> Reply:
        await gate.wait()
        return Reply(tool_calls=[("write", {"path": "w"}), ("write", {"path": "skipped"})])

    script = [
        Reply(text="prior"),
        Reply(tool_calls=[("look", {"path": "a"}), ("look", {"path": "b"})]),
        Reply(error=ContextOverflowError("long")),
        Reply(tool_calls=[("subagent", {"agent": "kid", "task": "help"})]),
        held, Reply(text="done")]
    loop = AgentLoop(Agent(name="main", tools=[look, write], subagents=[kid],
                           provider=ScriptedProvider(script)))
    await loop.run_turn("earlier", session_id="s")
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    await wait_for(sub, K.SUBTURN_END, seen=seen)
    await wait_for(sub, K.LLM_REQUEST, seen=seen)
    loop.inject_steering("no, stop", "s")  # arrives before the writes: both are skipped
    gate.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    events = [*seen, *sub.drain_nowait()]
    (spawn,) = of(events, K.SUBTURN_SPAWN)
    child = spawn.child_turn_id
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for e in events:
        assert e.session_id == "s", e
        assert (e.turn_id, e.parent_turn_id) in ((result.turn_id, None),
                                                 (child, result.turn_id)), e
        assert e.time > time.time() - 60, e
    mine = [e for e in events if e.turn_id == result.turn_id]
    declared = {c.id: (r.iteration, c.name) for r in of(mine, K.LLM_RESPONSE)
                for c in r.tool_calls}
    requests = {r.iteration for r in of(mine, K.LLM_REQUEST)}
    assert requests == {1, 2, 3, 4}
    for e in mine:
        if e.kind in (K.TOOL_EXEC_START, K.TOOL_EXEC_END, K.TOOL_EXEC_SKIPPED,
                      K.TOOL_EXEC_PROGRESS):
            assert e.call_id in declared and e.tool_name == declared[e.call_id][1], e
        if e.kind is K.TOOL_EXEC_START:
            assert e.iteration == declared[e.call_id][0], e
    assert [(e.text, e.data) for e in of(mine, K.TOOL_EXEC_PROGRESS)] == [
        ("looking at a", {"path": "a"}), ("looking at b", {"path": "b"})]
    ends = {e.content: e for e in of(mine, K.TOOL_EXEC_END)}
    assert sorted(ends) == ["kid done", "saw a", "saw b"]
    assert 0.02 <= ends["saw a"].duration < 30
    skipped = of(mine, K.TOOL_EXEC_SKIPPED)
    assert [(e.reason, declared[e.call_id][1]) for e in skipped] == [("steering", "write")] * 2
    sent = [m for m in loop.session_messages("s") if m.role == "tool"]
    assert sent[-1].content == ("Tool call skipped: a new user message arrived before this "
                                "tool started. Read it and decide what to do next.")
    assert sent[-1].is_error is True


async def test_progress_from_a_tools_thread_wakes_a_waiting_reader() -> None:
    # The tool waits until the reader has seen its progress: the report made in the tool's
    # worker thread must be handed to the loop's thread. Debug mode makes asyncio refuse any
    # loop call from another thread, so a report that skipped the hand-over fails the tool.
    import threading

    asyncio.get_running_loop().set_debug(True)

    seen_progress = threading.Event()

    @tool(read_only=True)
    def report_then_wait(ctx: ToolContext) -> str:
        """Report, then wait to be heard."""
        ctx.progress("halfway")
        return "heard" if seen_progress.wait(10) else "nobody heard"

    loop = AgentLoop(Agent(provider=ScriptedProvider(
        [Reply(tool_calls=[("report_then_wait", {})]), Reply(text="done")]),
        tools=[report_then_wait]))
    sub = loop.subscribe(kinds=[K.TOOL_EXEC_PROGRESS, K.TOOL_EXEC_END])
    handle = loop.start_turn("go", session_id="s")
    progress = await wait_for(sub, K.TOOL_EXEC_PROGRESS, timeout=5)
    seen_progress.set()
    assert progress.text == "halfway"
    end = await wait_for(sub, K.TOOL_EXEC_END)
    assert end.content == "heard"
    await handle
