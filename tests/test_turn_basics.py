"""A turn's shape: events in order, history, results in declared order, budget."""

from __future__ import annotations

import asyncio

import pytest

from steerable import EventKind, Message, Reply, ToolResult, TurnPhase, TurnStatus, tool
from tests.conftest import (
    assert_history_consistent,
    assert_one_terminal_per_call,
    kinds,
    make_loop,
    of,
)

K = EventKind


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a file."""
    await asyncio.sleep(0.01)
    return f"<{path}>"


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {len(content)} bytes to {path}"


async def test_text_only_turn_event_order_and_history() -> None:
    loop, provider, sub = make_loop([Reply(text="Hello there, friend.")])
    result = await loop.run_turn("hi", session_id="s1")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED
    assert result.text == "Hello there, friend."
    assert result.iterations == 1
    assert kinds(events) == [K.TURN_START, K.LLM_REQUEST, K.LLM_RESPONSE, K.TURN_END]
    deltas = of(events, K.LLM_DELTA)
    assert len(deltas) > 1 and "".join(d.text for d in deltas) == "Hello there, friend."
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    assert all(e.turn_id == result.turn_id and e.session_id == "s1" for e in events)
    assert all(e.parent_turn_id is None for e in events)
    assert loop.session_messages("s1") == [Message("user", "hi"), Message("assistant", "Hello there, friend.")]
    # the system message is sent first but never stored
    sent = provider.requests[0].messages
    assert sent[0] == Message("system", "You are a test agent.") and sent[1] == Message("user", "hi")
    provider.assert_consumed()


async def test_state_machine_events() -> None:
    loop, _, sub = make_loop([Reply(tool_calls=[("write_file", {"path": "a", "content": "x"})]),
                              Reply(text="ok")], tools=[write_file])
    await loop.run_turn("go", session_id="s")
    changes = [(e.old, e.new) for e in of(sub.drain_nowait(), K.STATE_CHANGED)]
    P = TurnPhase
    assert changes == [(P.IDLE, P.THINKING), (P.THINKING, P.EXECUTING),
                       (P.EXECUTING, P.THINKING), (P.THINKING, P.DONE)]


async def test_parallel_read_only_group_results_in_declared_order() -> None:
    order: list[str] = []

    @tool(read_only=True)
    async def slow(name: str, delay: float) -> str:
        """Sleep then answer."""
        await asyncio.sleep(delay)
        order.append(name)
        return name

    loop, _, sub = make_loop([
        Reply(tool_calls=[("slow", {"name": "a", "delay": 0.05}), ("slow", {"name": "b", "delay": 0.0}),
                          ("slow", {"name": "c", "delay": 0.02})]),
        Reply(text="done")], tools=[slow])
    result = await loop.run_turn("go", session_id="s")
    assert order == ["b", "c", "a"]  # they ran at once
    tool_msgs = [m for m in loop.session_messages("s") if m.role == "tool"]
    assert [m.content for m in tool_msgs] == ["a", "b", "c"]
    events = sub.drain_nowait()
    starts = [e.seq for e in of(events, K.TOOL_EXEC_START)]
    ends = [e.seq for e in of(events, K.TOOL_EXEC_END)]
    assert max(starts) < min(ends)
    assert result.tools_run == ("slow", "slow", "slow")


async def test_grouping_mutating_tools_run_alone_and_in_order() -> None:
    running: list[str] = []
    log: list[str] = []

    @tool(read_only=True)
    async def look(name: str) -> str:
        """Look."""
        running.append(name)
        await asyncio.sleep(0)  # let every call of the group start (they are all scheduled)
        log.append(f"look {name} saw {sorted(running)}")
        await asyncio.sleep(0)  # stay inside until the siblings have looked too
        running.remove(name)
        return name

    @tool
    async def change(name: str) -> str:
        """Change."""
        running.append(name)
        await asyncio.sleep(0)  # a sibling running at once would be seen here
        log.append(f"change {name} saw {sorted(running)}")
        running.remove(name)
        return name

    calls = [("look", {"name": "r1"}), ("look", {"name": "r2"}), ("change", {"name": "w1"}),
             ("look", {"name": "r3"}), ("change", {"name": "w2"}), ("change", {"name": "w3"})]
    loop, _, _ = make_loop([Reply(tool_calls=calls), Reply(text="ok")], tools=[look, change])
    await loop.run_turn("go", session_id="s")
    assert sorted(log[:2]) == ["look r1 saw ['r1', 'r2']", "look r2 saw ['r1', 'r2']"]
    assert log[2:] == ["change w1 saw ['w1']", "look r3 saw ['r3']", "change w2 saw ['w2']",
                       "change w3 saw ['w3']"]


async def test_parallelism_is_bounded() -> None:
    from steerable import Agent, AgentLoop, Limits, ScriptedProvider

    peak = 0
    now = 0

    @tool(read_only=True)
    async def probe(i: int) -> str:
        """Probe."""
        nonlocal peak, now
        now += 1
        peak = max(peak, now)
        await asyncio.sleep(0.01)
        now -= 1
        return str(i)

    provider = ScriptedProvider([Reply(tool_calls=[("probe", {"i": i}) for i in range(7)]), Reply(text="ok")])
    loop = AgentLoop(Agent(provider=provider, tools=[probe]), limits=Limits(parallel_tools=3))
    await loop.run_turn("go", session_id="s")
    assert peak == 3


async def test_tool_errors_become_results_and_turn_goes_on() -> None:
    @tool
    def boom(x: int) -> str:
        """Raise."""
        raise RuntimeError("disk on fire")

    @tool(timeout=0.05)
    async def hang() -> str:
        """Hang."""
        await asyncio.sleep(30)
        return "never"

    script = [
        Reply(tool_calls=[("nope", {}), ("boom", '{"x": 1'), ("boom", {"x": "not-int"}),
                          ("boom", {"x": 1}), ("hang", {})]),
        Reply(text="recovered"),
    ]
    loop, provider, sub = make_loop(script, tools=[boom, hang])
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED and result.text == "recovered"
    events = sub.drain_nowait()
    ends = of(events, K.TOOL_EXEC_END)
    assert [e.is_error for e in ends] == [True] * 5
    texts = [m.content for m in loop.session_messages("s") if m.role == "tool"]
    assert "Unknown tool 'nope'" in texts[0] and "boom, hang" in texts[0]
    assert "not valid JSON" in texts[1]
    assert "Invalid arguments for tool 'boom'" in texts[2] and "'x'" in texts[2]
    assert "RuntimeError: disk on fire" in texts[3]
    assert "timed out after 0.05 s" in texts[4]
    assert all(m.is_error for m in loop.session_messages("s") if m.role == "tool")
    # the model reads the errors in its next request
    assert [m.role for m in provider.requests[1].messages[-5:]] == ["tool"] * 5
    assert_one_terminal_per_call(events)


async def test_tool_return_values_are_converted() -> None:
    @tool(read_only=True)
    def as_dict() -> dict[str, int]:
        """Dict."""
        return {"a": 1}

    @tool(read_only=True)
    def as_result() -> ToolResult:
        """Result."""
        return ToolResult("bad", is_error=True)

    @tool(read_only=True)
    def as_none() -> None:
        """None."""

    loop, _, _ = make_loop([Reply(tool_calls=[("as_dict", {}), ("as_result", {}), ("as_none", {})]),
                            Reply(text="ok")], tools=[as_dict, as_result, as_none])
    await loop.run_turn("go", session_id="s")
    tool_msgs = [m for m in loop.session_messages("s") if m.role == "tool"]
    assert [(m.content, m.is_error) for m in tool_msgs] == [('{"a": 1}', False), ("bad", True), ("", False)]


async def test_progress_events_from_async_and_sync_tools() -> None:
    from steerable import ToolContext

    @tool(read_only=True)
    async def stepper(ctx: ToolContext) -> str:
        """Steps."""
        for i in range(3):
            ctx.progress(f"step {i}", i=i)
            await asyncio.sleep(0)
        return "done"

    @tool
    def threaded(ctx: ToolContext) -> str:
        """Runs in a thread."""
        ctx.progress("from a thread")
        return "ok"

    loop, _, sub = make_loop([Reply(tool_calls=[("stepper", {}), ("threaded", {})]), Reply(text="ok")],
                             tools=[stepper, threaded])
    await loop.run_turn("go", session_id="s")
    progress = of(sub.drain_nowait(), K.TOOL_EXEC_PROGRESS)
    assert [p.text for p in progress] == ["step 0", "step 1", "step 2", "from a thread"]
    assert progress[1].data == {"i": 1}
    assert progress[0].tool_name == "stepper"


async def test_dry_run_previews_mutating_tools_only() -> None:
    ran: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete."""
        ran.append(path)
        return "deleted"

    @tool(preview=lambda a: f"would write {a['path']}")
    def write(path: str) -> str:
        """Write."""
        ran.append(path)
        return "written"

    @tool(read_only=True)
    def look(path: str) -> str:
        """Look."""
        ran.append("look " + path)
        return "seen"

    script = [Reply(tool_calls=[("delete", {"path": "/x"}), ("write", {"path": "a"}), ("look", {"path": "b"})]),
              Reply(text="ok")]
    loop, _, _ = make_loop(script, tools=[delete, write, look], dry_run=True)
    await loop.run_turn("go", session_id="s")
    assert ran == ["look b"]
    texts = [m.content for m in loop.session_messages("s") if m.role == "tool"]
    assert texts[0].startswith("[dry-run] delete was not run") and '"/x"' in texts[0]
    assert texts[1] == "would write a"
    assert texts[2] == "seen"


async def test_iteration_budget_last_call_may_call_no_tool() -> None:
    loop, provider, sub = make_loop(
        [Reply(tool_calls=[("read_file", {"path": "a"})])] * 2 + [Reply(text="I must stop here.")],
        tools=[read_file], max_iterations=3)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.MAX_ITERATIONS
    assert result.text == "I must stop here."
    assert result.iterations == 3
    # the tools stay listed (the prompt starts as before: a server's cache keeps it); none
    # may be called
    assert [len(r.tools) for r in provider.requests] == [1, 1, 1]
    assert [r.tool_choice.mode for r in provider.requests] == ["auto", "auto", "none"]
    last = of(sub.drain_nowait(), K.LLM_REQUEST)[-1]
    assert last.tools == ("read_file",) and last.tool_choice == "none"


async def test_tool_calls_in_the_budget_call_are_closed_not_run() -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def look(path: str) -> str:
        """Look."""
        ran.append(path)
        return path

    loop, _, sub = make_loop([Reply(tool_calls=[("look", {"path": "a"})]),
                              Reply(text="still want", tool_calls=[("look", {"path": "b"})])],
                             tools=[look], max_iterations=2)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.MAX_ITERATIONS and ran == ["a"]
    skipped = of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)
    assert [s.reason for s in skipped] == ["max_iterations"]
    assert_history_consistent(loop.session_messages("s"))


async def test_final_answer_at_budget_after_text_is_completed() -> None:
    loop, _, _ = make_loop([Reply(text="just text")], max_iterations=1)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED


async def test_provider_error_ends_turn_with_error_and_keeps_consistent_prefix() -> None:
    loop, _, sub = make_loop([Reply(tool_calls=[("read_file", {"path": "a"})]),
                              Reply(error=RuntimeError("model exploded"))], tools=[read_file])
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ERROR
    assert isinstance(result.error, RuntimeError)
    events = sub.drain_nowait()
    assert events[-1].kind is K.TURN_END and events[-1].status is TurnStatus.ERROR
    assert "model exploded" in of(events, K.ERROR)[0].message
    saved = loop.session_messages("s")
    assert [m.role for m in saved] == ["user", "assistant", "tool"]
    assert_history_consistent(saved)


async def test_script_exhaustion_is_a_clear_error() -> None:
    loop, provider, _ = make_loop([Reply(tool_calls=[("read_file", {"path": "a"})])], tools=[read_file])
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ERROR
    assert "ran out of script" in str(result.error) and "request #2" in str(result.error)


async def test_history_carries_across_turns() -> None:
    loop, provider, _ = make_loop([Reply(text="one"), Reply(text="two")])
    await loop.run_turn("first", session_id="s")
    await loop.run_turn("second", session_id="s")
    sent = [m.content for m in provider.requests[1].messages]
    assert sent == ["You are a test agent.", "first", "one", "second"]
    assert len(loop.session_messages("s")) == 4


@pytest.mark.parametrize("bad", [None, 3, ""])
async def test_start_turn_rejects_bad_input(bad: object) -> None:
    loop, _, _ = make_loop([])
    with pytest.raises((TypeError, ValueError)):
        loop.start_turn(bad)  # type: ignore[arg-type]


class SlowStream:
    """A provider that streams one delta every 20 ms and records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False
        self.sent = 0

    async def stream(self, request):
        from steerable.providers import TextDelta

        try:
            for i in range(1000):
                yield TextDelta(f"w{i} ")
                self.sent += 1
                await asyncio.sleep(0.02)
        finally:
            self.closed = True

    async def aclose(self) -> None:
        return None


async def test_hard_abort_mid_stream_closes_the_provider_stream() -> None:
    from steerable import Agent, AgentLoop

    provider = SlowStream()
    loop = AgentLoop(Agent(provider=provider))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    deltas = 0
    async for event in sub:
        if event.kind is K.LLM_DELTA:
            deltas += 1
            if deltas == 3:
                break
    assert loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert provider.closed and provider.sent < 10
    assert loop.session_messages("s") == []


async def test_provider_that_goes_silent_fails_the_turn_not_the_loop() -> None:
    from steerable import Agent, AgentLoop, Timeouts

    loop = AgentLoop(Agent(provider=SlowStream()), timeouts=Timeouts(llm_idle=0.005))
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ERROR
    assert "sent nothing for 0.005 s" in str(result.error)


async def test_provider_yielding_garbage_is_an_error() -> None:
    from steerable import Agent, AgentLoop

    class Garbage:
        async def stream(self, request):
            yield "not a chunk"

        async def aclose(self) -> None:
            return None

    loop = AgentLoop(Agent(provider=Garbage()))
    sub = loop.subscribe()
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ERROR and "yielded str" in str(result.error)
    assert sub.drain_nowait()[-1].kind is K.TURN_END
    assert loop.session_messages("s") == [Message("user", "go")]


async def test_usage_is_summed_into_the_result_and_turn_end() -> None:
    from steerable import Usage

    loop, _, sub = make_loop([Reply(tool_calls=[("read_file", {"path": "a"})], usage=Usage(10, 2)),
                              Reply(text="ok", usage=Usage(15, 3))], tools=[read_file])
    result = await loop.run_turn("go", session_id="s")
    assert result.usage == Usage(25, 5)
    assert of(sub.drain_nowait(), K.TURN_END)[0].usage == Usage(25, 5)
