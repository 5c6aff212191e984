"""Sub-turns: the subagent/spawn tools, the ToolContext API, limits, delivery, orphans, aborts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Limits,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from steerable.errors import ConfigurationError, SubturnLimitError
from steerable.storage import JSONLSessionStore
from tests.conftest import assert_history_consistent, assert_one_terminal_per_call, of, wait_for

K = EventKind


def child(name: str = "researcher", *script: Any, **kw: Any) -> Agent:
    return Agent(name=name, description=f"the {name}", provider=ScriptedProvider(
        list(script) or [Reply(text=f"{name} answer")]), **kw)


def parent(script: list[Any], children: list[Any], tools: list[Any] = (), **kw: Any) -> Agent:  # type: ignore[assignment]
    return Agent(name="main", instructions="lead", provider=ScriptedProvider(script),
                 subagents=children, tools=list(tools), **kw)


def gated(text: str, gate: asyncio.Event) -> Any:
    async def answer(request: Any) -> Reply:
        await gate.wait()
        return Reply(text=text)
    return answer


def call(name: str, agent: str, task: str) -> tuple[str, dict[str, str]]:
    return (name, {"agent": agent, "task": task})


# -- the model-facing tools ---------------------------------------------------------------------

async def test_subagent_returns_the_childs_text_and_child_events_carry_the_parent() -> None:
    kid = child("researcher", Reply(text="X is 42"))
    main = parent([Reply(tool_calls=[call("subagent", "researcher", "find X")]),
                   Reply(text="X=42")], [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("what is X?", session_id="s")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED and result.text == "X=42"
    end = of(events, K.TOOL_EXEC_END)[0]
    assert end.content == "X is 42" and not end.is_error
    spawn, done = of(events, K.SUBTURN_SPAWN)[0], of(events, K.SUBTURN_END)[0]
    assert spawn.turn_id == result.turn_id and spawn.parent_turn_id is None
    assert spawn.agent == "researcher" and spawn.is_async is False
    assert done.child_turn_id == spawn.child_turn_id and done.status is TurnStatus.COMPLETED
    child_events = [e for e in events if e.turn_id == spawn.child_turn_id]
    assert child_events[0].kind is K.TURN_START and child_events[-1].kind is K.TURN_END
    assert child_events[0].input == "find X" and child_events[0].agent == "researcher"
    assert all(e.parent_turn_id == result.turn_id for e in child_events)
    assert all(e.session_id == "s" for e in child_events)
    assert not of(events, K.SUBTURN_RESULT_DELIVERED)  # a sync result is the tool result only
    # The child's request: its own instructions? none; the task as the user message.
    assert kid.provider.requests[0].messages[-1].content == "find X"  # type: ignore[attr-defined]
    spec = {t.name: t for t in main.provider.requests[0].tools}  # type: ignore[attr-defined]
    assert "researcher: the researcher" in spec["subagent"].description
    assert "researcher: the researcher" in spec["spawn"].description
    assert spec["subagent"].parameters["properties"]["agent"]["enum"] == ["researcher"]
    assert_one_terminal_per_call(events)


async def test_hooks_of_the_loop_see_the_childs_calls() -> None:
    seen: list[tuple[str, str | None]] = []

    class Spy:
        def before_llm(self, ctx: Any) -> None:
            seen.append((ctx.turn_id, ctx.parent_turn_id))

    main = parent([Reply(tool_calls=[call("subagent", "researcher", "t")]), Reply(text="ok")],
                  [child()])
    loop = AgentLoop(main)
    loop.register_hook(Spy())
    result = await loop.run_turn("go")
    parents = [p for _, p in seen]
    assert parents == [None, result.turn_id, None]


async def test_spawn_result_enters_the_context_before_the_next_call_after_the_child_ended() -> None:
    gate = asyncio.Event()
    kid = child("worker", gated("worker finished: 7 files", gate))
    main = parent([Reply(tool_calls=[call("spawn", "worker", "count files")]),
                   Reply(text="waiting"),  # the model answers; the child is still running
                   ], [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    end = await wait_for(sub, K.TOOL_EXEC_END, seen=seen)
    assert "Started sub-agent worker" in end.content and not end.is_error
    result = await handle  # the parent does not wait for an async child
    assert result.status is TurnStatus.COMPLETED
    gate.set()
    await loop.wait_idle()
    events = sub.drain_nowait()
    orphan = of(events, K.SUBTURN_ORPHAN)
    assert len(orphan) == 1 and orphan[0].turn_id == result.turn_id
    (spawned,) = of(seen, K.SUBTURN_SPAWN)
    assert (orphan[0].child_turn_id, orphan[0].session_id) == (spawned.child_turn_id, "s")
    assert "worker finished: 7 files" in orphan[0].text
    saved = loop.session_messages("s")
    assert "worker finished: 7 files" in saved[-1].content and saved[-1].role == "user"
    assert sum("worker finished" in m.content for m in saved) == 1
    assert_history_consistent(saved)


async def test_spawn_result_delivered_exactly_once_before_the_following_llm_call() -> None:
    gate = asyncio.Event()
    kid = child("worker", gated("the answer is 7", gate))

    async def second(request: Any) -> Reply:
        gate.set()  # the child ends while this call is in flight
        await asyncio.sleep(0.05)
        return Reply(tool_calls=[("noop", {})])

    @tool(read_only=True)
    async def noop() -> str:
        """Do nothing."""
        return "ok"

    main = parent([Reply(tool_calls=[call("spawn", "worker", "compute")]), second,
                   Reply(text="7")], [kid], tools=[noop])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    requests = main.provider.requests  # type: ignore[attr-defined]
    assert not any("the answer is 7" in m.content for m in requests[1].messages)
    assert sum("the answer is 7" in m.content for m in requests[2].messages) == 1
    delivered = of(events, K.SUBTURN_RESULT_DELIVERED)
    assert len(delivered) == 1 and delivered[0].text == "the answer is 7"
    order = [e.kind for e in events if e.turn_id == result.turn_id
             and e.kind in (K.SUBTURN_END, K.SUBTURN_RESULT_DELIVERED, K.LLM_REQUEST)]
    assert order == [K.LLM_REQUEST, K.LLM_REQUEST, K.SUBTURN_END, K.SUBTURN_RESULT_DELIVERED,
                     K.LLM_REQUEST]
    assert not of(events, K.SUBTURN_ORPHAN)
    saved = loop.session_messages("s")
    assert sum("the answer is 7" in m.content for m in saved) == 1


async def test_unknown_agent_is_an_error_result_listing_the_valid_ones() -> None:
    main = parent([Reply(tool_calls=[call("subagent", "nobody", "x")]), Reply(text="ok")],
                  [child("alpha"), child("beta")])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    events = sub.drain_nowait()
    end = of(events, K.TOOL_EXEC_END)[0]
    assert end.is_error and "'nobody'" in end.content and "alpha, beta" in end.content
    assert not of(events, K.SUBTURN_SPAWN)


async def test_a_child_that_fails_gives_an_error_result_and_subturn_end() -> None:
    kid = child("flaky", Reply(error=RuntimeError("model exploded")))
    main = parent([Reply(tool_calls=[call("subagent", "flaky", "x")]), Reply(text="recovered")],
                  [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED and result.text == "recovered"
    end = of(events, K.TOOL_EXEC_END)[0]
    assert end.is_error and "ended error" in end.content and "model exploded" in end.content
    assert [e.status for e in of(events, K.SUBTURN_END)] == [TurnStatus.ERROR]


# -- limits -------------------------------------------------------------------------------------

async def test_depth_limit_refuses_at_once_naming_the_limit() -> None:
    leaf = child("leaf")
    middle = Agent(name="middle", provider=ScriptedProvider([
        Reply(tool_calls=[call("subagent", "leaf", "deeper")]), Reply(text="middle done")]),
        subagents=[leaf])
    main = parent([Reply(tool_calls=[call("subagent", "middle", "go down")]), Reply(text="ok")],
                  [middle])
    loop = AgentLoop(main, limits=Limits(subturn_depth=1))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    events = sub.drain_nowait()
    ends = of(events, K.TOOL_EXEC_END)
    refused = [e for e in ends if e.is_error]
    assert len(refused) == 1 and "subturn_depth=1" in refused[0].content
    assert len(of(events, K.SUBTURN_SPAWN)) == 1  # the leaf was never started
    assert leaf.provider.requests == []  # type: ignore[attr-defined]


async def test_per_turn_limit_counts_running_children() -> None:
    gate = asyncio.Event()
    main = parent([Reply(tool_calls=[call("spawn", "a", "1"), call("spawn", "b", "2")]),
                   Reply(text="ok")], [child("a", gated("a", gate)), child("b")])
    loop = AgentLoop(main, limits=Limits(subturns_per_turn=1))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    gate.set()
    await loop.wait_idle()
    events = sub.drain_nowait()
    ends = {e.content.split(" ")[2] if not e.is_error else "refused": e for e in of(events, K.TOOL_EXEC_END)}
    assert "subturns_per_turn=1" in ends["refused"].content
    assert [s.agent for s in of(events, K.SUBTURN_SPAWN)] == ["a"]


async def test_slot_is_freed_before_the_result_is_delivered() -> None:
    ended = asyncio.Event()

    @tool
    async def wait_child() -> str:
        """Wait until the first child has ended."""
        await ended.wait()
        return "ended"

    main = parent([Reply(tool_calls=[call("spawn", "a", "1"), ("wait_child", {}),
                                     call("spawn", "b", "2")]), Reply(text="ok")],
                  [child("a"), child("b")], tools=[wait_child])
    loop = AgentLoop(main, limits=Limits(subturns_per_turn=1))
    loop.register_hook(type("H", (), {"on_event": lambda self, e: ended.set()
                                      if e.kind is K.SUBTURN_END else None})())
    sub = loop.subscribe(buffer=10_000)
    result = await asyncio.wait_for(loop.run_turn("go", session_id="s"), 5)
    await loop.wait_idle()
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED
    assert not any(e.is_error for e in of(events, K.TOOL_EXEC_END))
    assert [s.agent for s in of(events, K.SUBTURN_SPAWN)] == ["a", "b"]


async def test_active_turns_limit_refuses_a_subturn_and_queues_a_top_level_turn() -> None:
    main = parent([Reply(tool_calls=[call("subagent", "a", "1")]), Reply(text="ok")], [child("a")])
    loop = AgentLoop(main, limits=Limits(active_turns=1))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    end = of(sub.drain_nowait(), K.TOOL_EXEC_END)[0]
    assert end.is_error and "active_turns=1" in end.content

    gate = asyncio.Event()
    solo = Agent(name="solo", provider=ScriptedProvider([gated("first", gate), Reply(text="second")]))
    loop2 = AgentLoop(solo, limits=Limits(active_turns=1))
    sub2 = loop2.subscribe(buffer=10_000)
    first = loop2.start_turn("one", session_id="s1")
    second = loop2.start_turn("two", session_id="s2")
    await wait_for(sub2, K.LLM_REQUEST)
    await asyncio.sleep(0.02)
    assert len(solo.provider.requests) == 1  # type: ignore[attr-defined]  # the second waits
    gate.set()
    assert (await first).text == "first" and (await second).text == "second"
    # A queued turn can still be aborted while it waits for its slot.
    gate2 = asyncio.Event()
    solo2 = Agent(name="solo", provider=ScriptedProvider([gated("x", gate2)]))
    loop3 = AgentLoop(solo2, limits=Limits(active_turns=1))
    busy = loop3.start_turn("one", session_id="a")
    queued = loop3.start_turn("two", session_id="b")
    await asyncio.sleep(0.01)
    assert loop3.interrupt_hard("b") is True
    assert (await asyncio.wait_for(queued, 1)).status is TurnStatus.ABORTED
    gate2.set()
    assert (await busy).status is TurnStatus.COMPLETED


# -- interrupts ---------------------------------------------------------------------------------

async def test_hard_abort_cascades_and_children_end_before_the_parent() -> None:
    grandkid = child("g", Reply(text="never", delay=10))
    kid = Agent(name="k", description="k", provider=ScriptedProvider([
        Reply(tool_calls=[call("subagent", "g", "deep")])]), subagents=[grandkid])
    bg = child("bg", Reply(text="never", delay=10))
    main = parent([Reply(tool_calls=[call("spawn", "bg", "x"), call("subagent", "k", "y")])],
                  [kid, bg])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    while len([e for e in seen if e.kind is K.LLM_REQUEST]) < 4:  # main, bg, k, g
        await wait_for(sub, K.LLM_REQUEST, seen=seen)
    info = loop.active_turn("s")
    assert info is not None and {c.agent for c in info.children} == {"bg", "k"}
    assert [g.agent for c in info.children for g in c.children] == ["g"]
    assert loop.interrupt_hard("s") is True
    result = await asyncio.wait_for(handle, 1)
    events = seen + sub.drain_nowait()
    assert result.status is TurnStatus.ABORTED
    ends = [e for e in events if e.kind is K.TURN_END]
    assert [e.status for e in ends] == [TurnStatus.ABORTED] * 4
    assert ends[-1].turn_id == handle.turn_id  # every descendant ended first
    assert loop.statistics().active_turns == 0
    assert loop.session_messages("s") == []  # rolled back
    assert_one_terminal_per_call(events)


async def test_graceful_interrupt_does_not_cascade() -> None:
    gate = asyncio.Event()
    kid = child("slow", gated("slow result", gate))
    main = parent([Reply(tool_calls=[call("subagent", "slow", "work")]), Reply(text="summary")],
                  [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.SUBTURN_SPAWN)
    assert loop.interrupt_graceful("s") is True
    gate.set()
    result = await handle
    events = sub.drain_nowait()
    assert result.status is TurnStatus.INTERRUPTED and result.text == "summary"
    assert [e.status for e in of(events, K.SUBTURN_END)] == [TurnStatus.COMPLETED]
    assert of(events, K.TOOL_EXEC_END)[0].content == "slow result"


async def test_steering_reaches_the_child_it_names() -> None:
    gate = asyncio.Event()
    kid = child("k", gated("first", gate), Reply(text="steered"))
    main = parent([Reply(tool_calls=[call("subagent", "k", "work")]), Reply(text="ok")], [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    spawn = await wait_for(sub, K.SUBTURN_SPAWN)
    child_handle = loop.turn_handle(spawn.child_turn_id)
    assert child_handle is not None and child_handle.turn_id == spawn.child_turn_id
    assert child_handle.inject_steering("also Y")
    gate.set()
    result = await handle
    assert of(sub.drain_nowait(), K.TOOL_EXEC_END)[0].content == "steered"
    assert kid.provider.requests[1].messages[-1].content == "also Y"  # type: ignore[attr-defined]
    assert all("also Y" not in m.content for m in main.provider.requests[-1].messages)  # type: ignore[attr-defined]
    assert result.status is TurnStatus.COMPLETED
    assert loop.turn_handle(spawn.child_turn_id) is None


# -- races on purpose ---------------------------------------------------------------------------

async def test_result_pending_while_the_parent_is_aborted_is_kept_as_an_orphan() -> None:
    gate = asyncio.Event()
    kid = child("quick", gated("quick result", gate))
    main = parent([Reply(tool_calls=[call("spawn", "quick", "x")]), Reply(text="late", delay=10)],
                  [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    await wait_for(sub, K.TOOL_EXEC_END, seen=seen)
    await wait_for(sub, K.LLM_REQUEST, seen=seen)  # the parent's second call, which waits
    gate.set()
    await wait_for(sub, K.SUBTURN_END, seen=seen)  # the result now waits for the next call
    loop.interrupt_hard("s")
    result = await handle
    await loop.wait_idle()
    events = seen + sub.drain_nowait()
    assert result.status is TurnStatus.ABORTED
    saved = loop.session_messages("s")
    assert [m.role for m in saved] == ["user"] and "quick result" in saved[0].content
    assert len(of(events, K.SUBTURN_ORPHAN)) == 1
    assert not of(events, K.SUBTURN_RESULT_DELIVERED)


class SlowSaveStore(JSONLSessionStore):
    """A JSONL store whose saves of turns wait for a gate (orphans pass straight through)."""

    def __init__(self, root: Any, gate: Any) -> None:
        super().__init__(root)
        self.gate = gate

    def append(self, session_id: str, messages: Any, turn: Any) -> None:
        if turn is not None:
            self.gate.wait(5)
        super().append(session_id, messages, turn)


async def test_result_arriving_while_the_parent_saves_is_written_after_it(tmp_path: Any) -> None:
    import threading

    save_gate, child_gate = threading.Event(), asyncio.Event()
    kid = child("k", gated("child text", child_gate))
    main = parent([Reply(tool_calls=[call("spawn", "k", "x")]), Reply(text="parent done")], [kid])
    loop = AgentLoop(main, store=SlowSaveStore(tmp_path, save_gate))
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    await wait_for(sub, K.LLM_RESPONSE, seen=seen)
    await wait_for(sub, K.LLM_RESPONSE, seen=seen)  # the final answer: the save starts now
    await asyncio.sleep(0.02)
    child_gate.set()
    await wait_for(sub, K.SUBTURN_END, seen=seen)
    save_gate.set()
    result = await handle
    await loop.wait_idle()
    saved = loop.session_messages("s")
    assert result.status is TurnStatus.COMPLETED
    assert saved[-2].content == "parent done" and "child text" in saved[-1].content
    assert sum("child text" in m.content for m in saved) == 1
    events = seen + sub.drain_nowait()
    assert len(of(events, K.SUBTURN_ORPHAN)) == 1


async def test_many_children_finishing_at_once_are_each_delivered_once() -> None:
    n = 30
    gate = asyncio.Event()
    kids = [child(f"c{i}", gated(f"result-{i}-end", gate)) for i in range(n)]

    async def wait_then_answer(request: Any) -> Reply:
        gate.set()
        for _ in range(50):  # let every child finish while this call is in flight
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        return Reply(tool_calls=[("noop", {})])

    @tool(read_only=True)
    async def noop() -> str:
        """Nothing."""
        return "ok"

    main = parent([Reply(tool_calls=[call("spawn", f"c{i}", "go") for i in range(n)]),
                   wait_then_answer, Reply(text="all in")], kids, tools=[noop])
    loop = AgentLoop(main, limits=Limits(subturns_per_turn=n, parallel_tools=n))
    sub = loop.subscribe(buffer=100_000)
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED
    delivered = sorted(e.text for e in of(events, K.SUBTURN_RESULT_DELIVERED))
    assert delivered == sorted(f"result-{i}-end" for i in range(n))
    last = main.provider.requests[-1].messages  # type: ignore[attr-defined]
    for i in range(n):
        assert sum(f"result-{i}-end" in m.content for m in last) == 1
    assert not of(events, K.SUBTURN_ORPHAN)


async def test_sync_result_is_delivered_once_even_with_async_siblings() -> None:
    main = parent([Reply(tool_calls=[call("spawn", "a", "bg"), call("subagent", "b", "fg")]),
                   Reply(text="ok")], [child("a", Reply(text="AAA")), child("b", Reply(text="BBB"))])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    await loop.wait_idle()
    events = sub.drain_nowait()
    saved = loop.session_messages("s")
    assert sum("BBB" in m.content for m in saved) == 1
    assert sum("AAA" in m.content for m in saved) == 1
    assert [e.text for e in of(events, K.SUBTURN_RESULT_DELIVERED)] == ["AAA"]


# -- code-facing API, store, bad input ----------------------------------------------------------

async def test_a_tool_runs_and_spawns_children_through_its_context() -> None:
    helper = child("helper", Reply(text="sync part"), Reply(text="async part"))
    parents: list[str | None] = []

    @tool
    async def delegate(ctx: ToolContext) -> str:
        """Use a helper twice."""
        first = await ctx.run_subturn(helper, "part one")
        handle = ctx.spawn_subturn(helper, "part two", deliver=False)
        second = await handle
        parents.extend([first.parent_turn_id, second.parent_turn_id, ctx.turn_id])
        return f"{first.text} + {second.text} ({second.status.value})"

    main = Agent(name="main", provider=ScriptedProvider([Reply(tool_calls=[("delegate", {})]),
                                                        Reply(text="ok")]), tools=[delegate])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go")
    events = sub.drain_nowait()
    assert of(events, K.TOOL_EXEC_END)[0].content == "sync part + async part (completed)"
    assert parents == [result.turn_id] * 3 and result.parent_turn_id is None  # each result says whose
    assert [e.is_async for e in of(events, K.SUBTURN_SPAWN)] == [False, True]
    assert not of(events, K.SUBTURN_RESULT_DELIVERED) and not of(events, K.SUBTURN_ORPHAN)


async def test_a_tool_gets_a_limit_error_it_can_catch() -> None:
    caught: list[SubturnLimitError] = []

    @tool
    async def dig(ctx: ToolContext) -> str:
        """Try to go deep."""
        try:
            await ctx.run_subturn(child(), "x")
        except SubturnLimitError as exc:
            caught.append(exc)
        return "tried"

    main = Agent(name="main", provider=ScriptedProvider([Reply(tool_calls=[("dig", {})]),
                                                        Reply(text="ok")]), tools=[dig])
    await AgentLoop(main, limits=Limits(subturns_per_turn=1, subturn_depth=1)).run_turn("go")
    assert caught == []
    main2 = Agent(name="main", provider=ScriptedProvider([Reply(tool_calls=[("dig", {})]),
                                                         Reply(text="ok")]), tools=[dig])
    loop = AgentLoop(main2, limits=Limits(active_turns=1))
    await loop.run_turn("go")
    assert [e.limit for e in caught] == ["active_turns"]


async def test_tool_timeout_aborts_its_sync_child() -> None:
    slow = child("slow", Reply(text="never", delay=10))

    @tool(timeout=0.05)
    async def impatient(ctx: ToolContext) -> str:
        """Wait for a slow child, but not long."""
        return (await ctx.run_subturn(slow, "x")).text

    main = Agent(name="main", provider=ScriptedProvider([Reply(tool_calls=[("impatient", {})]),
                                                        Reply(text="ok")]), tools=[impatient])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    await asyncio.wait_for(loop.wait_idle(), 2)
    events = sub.drain_nowait()
    assert [e.status for e in of(events, K.SUBTURN_END)] == [TurnStatus.ABORTED]
    assert "timed out" in of(events, K.TOOL_EXEC_END)[0].content


async def test_children_never_reach_the_store(tmp_path: Any) -> None:
    store = JSONLSessionStore(tmp_path)
    main = parent([Reply(tool_calls=[call("subagent", "k", "secret task")]), Reply(text="ok")],
                  [child("k", Reply(text="child says hi"))])
    loop = AgentLoop(main, store=store)
    result = await loop.run_turn("go", session_id="s")
    assert [i.session_id for i in store.list_sessions()] == ["s"]
    saved = loop.session_messages("s")
    assert [m.role for m in saved] == ["user", "assistant", "tool", "assistant"]
    assert saved[2].content == "child says hi"
    assert not any(m.role == "user" and m.content == "secret task" for m in saved)
    assert len(result.messages) == 4


def test_bad_subagents_are_refused_when_the_agent_is_built() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(ConfigurationError, match="two child agents are named 'a'"):
        Agent(provider=provider, subagents=[child("a"), child("a")])
    with pytest.raises(ConfigurationError, match="is not an agent"):
        Agent(provider=provider, subagents=["a"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="list of agents"):
        Agent(provider=provider, subagents=child("a"))  # type: ignore[arg-type]

    @tool
    def spawn(x: str) -> str:
        """A clash."""
        return x

    with pytest.raises(ConfigurationError, match="'spawn'"):
        Agent(provider=provider, subagents=[child("a")], tools=[spawn])
    with pytest.raises(ValueError, match="subturn_depth"):
        Limits(subturn_depth=0)
    with pytest.raises(ValueError, match="subturns_per_turn"):
        Limits(subturns_per_turn=0)
    plain = Agent(provider=provider)
    assert plain.tools == () and plain.subagents == ()


async def test_a_dry_run_parent_runs_its_children_dry_too(tmp_path: Any) -> None:
    target = tmp_path / "out.txt"

    @tool
    async def write_file(text: str) -> str:
        """Write the file."""
        target.write_text(text)
        return "written"

    writer = child("writer", Reply(tool_calls=[("write_file", {"text": "hi"})]), Reply(text="did it"),
                   tools=[write_file])
    main = parent([Reply(tool_calls=[call("subagent", "writer", "write hi")]), Reply(text="ok")],
                  [writer], dry_run=True)
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    events = sub.drain_nowait()
    assert not target.exists()
    child_end = next(e for e in of(events, K.TOOL_EXEC_END) if e.tool_name == "write_file")
    assert child_end.content.startswith("[dry-run]")
    assert writer.dry_run is False  # the agent itself is unchanged


async def test_a_grandchild_outliving_its_parent_reaches_the_session() -> None:
    gate = asyncio.Event()
    grandkid = child("g", gated("grandchild text", gate))
    kid = Agent(name="k", provider=ScriptedProvider([
        Reply(tool_calls=[call("spawn", "g", "later")]), Reply(text="k done")]),
        subagents=[grandkid])
    main = parent([Reply(tool_calls=[call("subagent", "k", "go")]), Reply(text="main done")],
                  [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    info = loop.active_turn("s")
    assert info is None  # the top-level turn is over; the grandchild runs on its own
    gate.set()
    await loop.wait_idle()
    events = sub.drain_nowait()
    k_turn = next(e.child_turn_id for e in of(events, K.SUBTURN_SPAWN) if e.agent == "k")
    orphan = of(events, K.SUBTURN_ORPHAN)
    assert len(orphan) == 1 and orphan[0].turn_id == k_turn
    saved = loop.session_messages("s")
    assert saved[-2].content == "main done" and "grandchild text" in saved[-1].content


class SlowToStop:
    """A provider that never answers and takes a moment to close its call when cancelled
    (as an HTTP provider closing its connection does)."""

    def __init__(self) -> None:
        self.closed = 0

    async def stream(self, request: Any) -> Any:
        try:
            await asyncio.sleep(10)
            yield None
        finally:
            await asyncio.sleep(0.05)
            self.closed += 1

    async def aclose(self) -> None:
        pass


async def test_the_parent_waits_for_children_that_are_slow_to_stop() -> None:
    slow = SlowToStop()
    kid = Agent(name="slow", description="slow", provider=slow)
    main = parent([Reply(tool_calls=[call("spawn", "slow", "a"), call("subagent", "slow", "b")])],
                  [kid])
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    while len(of(seen, K.LLM_REQUEST)) < 3:
        await wait_for(sub, K.LLM_REQUEST, seen=seen)
    loop.interrupt_hard("s")
    result = await asyncio.wait_for(handle, 2)
    events = seen + sub.drain_nowait()
    assert result.status is TurnStatus.ABORTED and slow.closed == 2
    ends = of(events, K.TURN_END)
    assert [e.turn_id == handle.turn_id for e in ends] == [False, False, True]
    assert loop.statistics().active_turns == 0
