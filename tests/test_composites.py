"""Composite agents: sequential, parallel, looping, nested, as sub-agents; stops and aborts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    LoopAgent,
    ParallelAgent,
    Reply,
    ScriptedProvider,
    SequentialAgent,
    TurnStatus,
)
from steerable.errors import ConfigurationError
from tests.conftest import of, wait_for

K = EventKind


def echo(name: str, prefix: str | None = None) -> Agent:
    """An agent that answers '<prefix>(<its input>)' every time it is asked."""
    tag = prefix or name

    def answer(request: Any) -> Reply:
        return Reply(text=f"{tag}({request.messages[-1].content})")

    return Agent(name=name, description=f"{name} agent", provider=ScriptedProvider([answer] * 20))


def gated(name: str, gate: asyncio.Event, text: str | None = None) -> Agent:
    async def answer(request: Any) -> Reply:
        await gate.wait()
        return Reply(text=text or f"{name} done")

    return Agent(name=name, provider=ScriptedProvider([answer]))


async def test_sequential_feeds_each_output_to_the_next_in_order() -> None:
    seq = SequentialAgent(name="pipeline", agents=[echo("a"), echo("b"), echo("c")])
    loop = AgentLoop(seq)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("x", session_id="s")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED and result.text == "c(b(a(x)))"
    spawns = of(events, K.SUBTURN_SPAWN)
    assert [s.agent for s in spawns] == ["a", "b", "c"]
    assert all(s.turn_id == result.turn_id for s in spawns)
    starts = [e for e in of(events, K.TURN_START) if e.parent_turn_id == result.turn_id]
    assert [e.input for e in starts] == ["x", "a(x)", "b(a(x))"]
    # one child at a time: each ends before the next starts
    order = [(e.kind, e.child_turn_id) for e in events if e.kind in (K.SUBTURN_SPAWN, K.SUBTURN_END)]
    assert [k for k, _ in order] == [K.SUBTURN_SPAWN, K.SUBTURN_END] * 3
    saved = loop.session_messages("s")
    assert [(m.role, m.content) for m in saved] == [("user", "x"), ("assistant", "c(b(a(x)))")]
    assert of(events, K.TURN_START)[0].agent == "pipeline"


async def test_parallel_runs_children_at_once_and_lists_each_text_under_its_name() -> None:
    started: list[str] = []
    both = asyncio.Event()

    def meeting(name: str) -> Agent:
        async def answer(request: Any) -> Reply:
            started.append(name)
            if len(started) == 2:
                both.set()
            await asyncio.wait_for(both.wait(), 2)  # only returns if both run at the same time
            return Reply(text=f"{name} says {request.messages[-1].content}")
        return Agent(name=name, provider=ScriptedProvider([answer]))

    par = ParallelAgent(name="fan", agents=[meeting("left"), meeting("right")])
    result = await AgentLoop(par).run_turn("hi")
    assert result.status is TurnStatus.COMPLETED
    assert result.text == "## left\nleft says hi\n\n## right\nright says hi"


async def test_parallel_lists_a_failed_child_and_keeps_the_others() -> None:
    bad = Agent(name="bad", provider=ScriptedProvider([Reply(error=RuntimeError("boom"))]))
    par = ParallelAgent(name="fan", agents=[echo("good"), bad])
    result = await AgentLoop(par).run_turn("q")
    assert result.status is TurnStatus.COMPLETED
    assert "## good\ngood(q)" in result.text and "## bad (error: boom)" in result.text
    all_bad = ParallelAgent(name="fan", agents=[
        Agent(name="b1", provider=ScriptedProvider([Reply(error=RuntimeError("boom"))]))])
    failed = await AgentLoop(all_bad).run_turn("q")
    assert failed.status is TurnStatus.ERROR and "every child failed" in str(failed.error)


async def test_loop_agent_repeats_until_the_condition_holds() -> None:
    seen: list[str] = []

    def until(result: Any) -> bool:
        seen.append(result.text)
        return result.text.count("r(") >= 3

    looped = LoopAgent(name="refine", agent=echo("r"), max_loops=10, until=until)
    result = await AgentLoop(looped).run_turn("draft")
    assert result.text == "r(r(r(draft)))"
    assert seen == ["r(draft)", "r(r(draft))", "r(r(r(draft)))"]

    async def never(result: Any) -> bool:
        return False

    capped = LoopAgent(name="refine", agent=echo("r"), max_loops=2, until=never)
    assert (await AgentLoop(capped).run_turn("d")).text == "r(r(d))"


async def test_loop_agent_until_that_raises_ends_in_error() -> None:
    def broken(result: Any) -> bool:
        raise KeyError("nope")

    looped = LoopAgent(name="l", agent=echo("r"), max_loops=3, until=broken)
    result = await AgentLoop(looped).run_turn("x")
    assert result.status is TurnStatus.ERROR and "until raised KeyError" in str(result.error)


async def test_a_failing_step_ends_the_sequence_in_error() -> None:
    bad = Agent(name="bad", provider=ScriptedProvider([Reply(error=RuntimeError("boom"))]))
    after = echo("after")
    seq = SequentialAgent(name="s", agents=[echo("a"), bad, after])
    loop = AgentLoop(seq)
    result = await loop.run_turn("x", session_id="s")
    assert result.status is TurnStatus.ERROR and "step 'bad' ended error" in str(result.error)
    assert after.provider.requests == []  # type: ignore[attr-defined]
    assert [m.role for m in loop.session_messages("s")] == ["user"]


async def test_nested_composites_and_a_composite_as_a_subagent() -> None:
    inner = ParallelAgent(name="panel", agents=[echo("p1"), echo("p2")],
                          description="asks two experts")
    outer = SequentialAgent(name="flow", agents=[echo("prep"), inner, echo("final")],
                            description="prepares, asks a panel, concludes")
    main = Agent(name="main", provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "flow", "task": "topic"})]), Reply(text="ok")]),
        subagents=[outer])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go")
    events = sub.drain_nowait()
    tool_text = of(events, K.TOOL_EXEC_END)[0].content
    assert tool_text == "final(## p1\np1(prep(topic))\n\n## p2\np2(prep(topic)))"
    assert "flow: prepares, asks a panel, concludes" in main.provider.requests[0].tools[0].description  # type: ignore[attr-defined]
    # the tree: main -> flow -> (prep, panel -> (p1, p2), final)
    parent_of = {e.turn_id: e.parent_turn_id for e in of(events, K.TURN_START)}
    agent_of = {e.turn_id: e.agent for e in of(events, K.TURN_START)}
    chain = {agent_of[t]: agent_of.get(p or "") for t, p in parent_of.items()}
    assert chain == {"main": None, "flow": "main", "prep": "flow", "panel": "flow",
                     "p1": "panel", "p2": "panel", "final": "flow"}
    assert result.status is TurnStatus.COMPLETED


async def test_graceful_interrupt_stops_at_the_next_boundary() -> None:
    gate = asyncio.Event()
    second = echo("second")
    seq = SequentialAgent(name="s", agents=[gated("first", gate, "first text"), second])
    loop = AgentLoop(seq)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.interrupt_graceful("s") is True
    gate.set()
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED and result.text == "first text"
    assert second.provider.requests == []  # type: ignore[attr-defined]
    ends = of(sub.drain_nowait(), K.SUBTURN_END)
    assert [e.status for e in ends] == [TurnStatus.COMPLETED]  # the running child finished


async def test_graceful_interrupt_during_a_parallel_group_lets_it_finish() -> None:
    gate = asyncio.Event()
    par = ParallelAgent(name="p", agents=[gated("a", gate), gated("b", gate)])
    loop = AgentLoop(par)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    seen: list[Any] = []
    while len(of(seen, K.LLM_REQUEST)) < 2:
        await wait_for(sub, K.LLM_REQUEST, seen=seen)
    assert loop.interrupt_graceful("s") is True
    gate.set()
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED
    assert result.text == "## a\na done\n\n## b\nb done"


async def test_hard_abort_reaches_every_child() -> None:
    gate = asyncio.Event()
    par = ParallelAgent(name="p", agents=[gated("a", gate), gated("b", gate),
                                          SequentialAgent(name="s", agents=[gated("c", gate)])])
    loop = AgentLoop(par)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    seen: list[Any] = []
    while len(of(seen, K.LLM_REQUEST)) < 3:
        await wait_for(sub, K.LLM_REQUEST, seen=seen)
    assert loop.interrupt_hard("s") is True
    result = await asyncio.wait_for(handle, 1)
    events = seen + sub.drain_nowait()
    ends = of(events, K.TURN_END)
    assert result.status is TurnStatus.ABORTED
    assert len(ends) == 5 and all(e.status is TurnStatus.ABORTED for e in ends)
    assert ends[-1].turn_id == handle.turn_id
    assert loop.session_messages("s") == []


def test_bad_composites_are_refused_when_built() -> None:
    a = echo("a")
    with pytest.raises(ConfigurationError, match="at least one child"):
        SequentialAgent(name="s", agents=[])
    with pytest.raises(ConfigurationError, match="at least one child"):
        ParallelAgent(name="p", agents=[])
    with pytest.raises(ConfigurationError, match="max_loops"):
        LoopAgent(name="l", agent=a, max_loops=0)
    with pytest.raises(ConfigurationError, match="not an agent"):
        LoopAgent(name="l", agent="a", max_loops=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="two child agents are named 'a'"):
        ParallelAgent(name="p", agents=[a, a])
    with pytest.raises(ConfigurationError, match="two child agents are named 'a'"):
        SequentialAgent(name="s", agents=[a, echo("a")])
    with pytest.raises(ConfigurationError, match="is not an agent"):
        SequentialAgent(name="s", agents=[a, object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="until must be callable"):
        LoopAgent(name="l", agent=a, max_loops=1, until=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="name"):
        SequentialAgent(name="", agents=[a])
    assert SequentialAgent(name="s", agents=[a, echo("b"), a]).agents[2] is a  # a repeat is fine


# -- cancel modes at boundaries, and the grace period of IMMEDIATE -------------------------------

def tooled(name: str, gate: asyncio.Event, ran: list[str]) -> Agent:
    """An agent whose (gated) model asks for a tool, then answers."""
    from steerable import tool

    @tool
    async def work() -> str:
        """Do the work."""
        ran.append(name)
        return "worked"

    async def first(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="calling", tool_calls=[("work", {})])

    return Agent(name=name, tools=[work],
                 provider=ScriptedProvider([first, Reply(text=f"{name} finished")]))


async def test_a_safe_point_cancel_stops_at_the_next_boundary() -> None:
    from steerable import CancelMode

    gate = asyncio.Event()
    second = echo("second")
    seq = SequentialAgent(name="s", agents=[gated("first", gate, "first text"), second])
    loop = AgentLoop(seq)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    cancel = loop.cancel("s", CancelMode.AFTER_TOOLS)
    assert cancel is not None
    gate.set()
    result = await handle
    assert await cancel.wait() is True
    assert result.status is TurnStatus.CANCELLED and result.text == "first text"
    assert second.provider.requests == []  # type: ignore[attr-defined]
    events = sub.drain_nowait()
    assert of(events, K.TURN_END)[-1].cancel_mode == "after_tools"
    assert [(m.role, m.content) for m in loop.session_messages("s")] == [
        ("user", "x"), ("assistant", "first text")]


async def test_immediate_gives_children_a_grace_period_to_stop_at_a_safe_point() -> None:
    from steerable import CancelMode

    gate, ran = asyncio.Event(), []
    seq = SequentialAgent(name="s", agents=[tooled("a", gate, ran), echo("b")], grace=5)
    loop = AgentLoop(seq)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    seen: list[Any] = []
    await wait_for(sub, K.LLM_REQUEST, seen=seen)
    cancel = loop.cancel("s", CancelMode.IMMEDIATE)
    assert cancel is not None
    await asyncio.sleep(0.02)
    assert not handle.done()  # the child is given time
    gate.set()  # the child's model answers with a tool call: it stops before running it
    result = await asyncio.wait_for(handle, 2)
    events = seen + sub.drain_nowait()
    assert result.status is TurnStatus.ABORTED and await cancel.wait() is True
    assert ran == []
    child_end = next(e for e in of(events, K.TURN_END) if e.parent_turn_id)
    assert child_end.status is TurnStatus.CANCELLED and child_end.cancel_mode == "after_model"
    modes = [e.mode for e in of(events, K.INTERRUPT_RECEIVED) if e.turn_id == handle.turn_id]
    assert modes[0] == "cancel_immediate"
    assert loop.session_messages("s") == []  # IMMEDIATE rolls the composite back


async def test_immediate_aborts_children_that_outlast_the_grace_period() -> None:
    from steerable import CancelMode

    gate = asyncio.Event()
    par = ParallelAgent(name="p", agents=[gated("a", gate), gated("b", gate)], grace=0.05)
    loop = AgentLoop(par)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    seen: list[Any] = []
    while len(of(seen, K.LLM_REQUEST)) < 2:
        await wait_for(sub, K.LLM_REQUEST, seen=seen)
    cancel = loop.cancel("s", CancelMode.IMMEDIATE)
    assert cancel is not None
    result = await asyncio.wait_for(handle, 2)
    events = seen + sub.drain_nowait()
    assert result.status is TurnStatus.ABORTED and await cancel.wait() is True
    assert [e.status for e in of(events, K.TURN_END)] == [TurnStatus.ABORTED] * 3
    assert of(events, K.TURN_END)[-1].turn_id == handle.turn_id


async def test_queued_parallel_children_do_not_start_after_a_cancel() -> None:
    from steerable import CancelMode, Limits

    gate = asyncio.Event()
    late = echo("late")
    par = ParallelAgent(name="p", agents=[gated("a", gate, "a text"), late])
    loop = AgentLoop(par, limits=Limits(subturns_per_turn=1))
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("x", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.cancel("s", CancelMode.AFTER_TOOLS) is not None
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert late.provider.requests == []  # type: ignore[attr-defined]
    assert "## late (not started" in result.text and "## a\na text" in result.text


def test_grace_must_be_a_non_negative_number() -> None:
    with pytest.raises(ConfigurationError, match=r"^SequentialAgent 's': grace must be a number "
                       r"of seconds >= 0, got -1$"):
        SequentialAgent(name="s", agents=[echo("a")], grace=-1)
    # No grace at all is a choice (abort the children at once), not an error.
    assert SequentialAgent(name="s", agents=[echo("a")], grace=0).grace == 0.0
    with pytest.raises(ConfigurationError, match="grace"):
        LoopAgent(name="l", agent=echo("a"), max_loops=1, grace="1")  # type: ignore[arg-type]
