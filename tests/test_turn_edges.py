"""Edges of one turn seen from outside: calls waiting behind ``parallel_tools`` are skipped,
with the reason, when steering or an interrupt comes; a refused ``send`` says why; waiting on
a session waits for a turn ``start_turn`` began; a cancel after the end contributes nothing;
sub-turns refuse an empty task and report a failed child's end."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    Limits,
    MessageState,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    Usage,
    tool,
)
from steerable.drivers import _lanes
from steerable.errors import SessionBusyError
from tests.conftest import of, wait_for

K = EventKind


def gated(script: list[Any], **loop_kw: Any) -> tuple[AgentLoop, asyncio.Event]:
    gate = asyncio.Event()

    @tool(read_only=True)  # calls of one response run as one group, ``parallel_tools`` at once
    async def work(step: str) -> str:
        """A step that waits for the gate."""
        await gate.wait()
        return f"did {step}"

    return AgentLoop(Agent(name="t", provider=ScriptedProvider(script), tools=[work]),
                     **loop_kw), gate


THREE = Reply(tool_calls=[("work", {"step": s}) for s in ("a", "b", "c")])


@pytest.mark.parametrize(("act", "reason", "text"), [
    ("steer", "steering", "Tool call skipped: a new user message arrived before this tool "
     "started. Read it and decide what to do next."),
    ("interrupt", "interrupted", "Tool call skipped: the user interrupted the turn before this "
     "tool started."),
])
async def test_calls_waiting_for_a_tool_slot_are_skipped_with_the_reason(
        act: str, reason: str, text: str) -> None:
    loop, gate = gated([THREE, Reply(text="ok")], limits=Limits(parallel_tools=1))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    if act == "steer":
        loop.inject_steering("stop that", "s")
    else:
        loop.interrupt_graceful("s")
    gate.set()
    result = await handle
    skipped = [(e.turn_id, e.call_id, e.tool_name, e.reason, e.detail)
               for e in of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)]
    t = result.turn_id
    assert skipped == [(t, "call_2", "work", reason, ""), (t, "call_3", "work", reason, "")]
    results = {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}
    assert results == {"call_1": "did a", "call_2": text, "call_3": text}
    await loop.aclose()


async def test_a_refused_send_says_why_in_its_error_and_its_message_state() -> None:
    loop, gate = gated([THREE, Reply(text="ok")])
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    why = f"the session is busy (turn {first.turn_id} is running)"
    text = (f"session 's' is busy (turn {first.turn_id} is running); the message was not "
            "queued (policy 'reject')")
    with pytest.raises(SessionBusyError, match=f"^{re.escape(text)}$"):
        loop.send("second", "s", "reject")
    (refused,) = [e for e in of(sub.drain_nowait(), K.MESSAGE_STATE)
                  if e.state is MessageState.REJECTED]
    assert (refused.text, refused.detail) == ("second", f"{why}; policy 'reject'")
    gate.set()
    await first  # type: ignore[misc]
    await loop.aclose()


async def test_waiting_on_a_session_waits_for_a_turn_start_turn_began() -> None:
    loop, gate = gated([THREE, Reply(text="ok")])
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    waiter = asyncio.ensure_future(loop.wait_session("s"))
    await wait_for(sub, K.TOOL_EXEC_START)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()
    gate.set()
    assert await asyncio.wait_for(waiter, 5) is None  # (no lane ran a turn for it)
    assert handle.done()
    await loop.aclose()


async def test_the_last_results_kept_are_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lanes, "RECENT_RESULTS", 2)
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider(
        [Reply(text="1"), Reply(text="2"), Reply(text="3")])))
    for sid in ("a", "b", "c"):
        await loop.send("go", sid)  # type: ignore[misc]
    assert await loop.wait_session("a") is None  # the oldest is forgotten
    assert [(await loop.wait_session(s)).text for s in ("b", "c")] == ["2", "3"]  # type: ignore[union-attr]
    await loop.aclose()


async def test_a_cancel_after_the_turn_ended_contributes_nothing() -> None:
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="done")])))
    handle = loop.start_turn("go", session_id="s")
    assert (await handle).status is TurnStatus.COMPLETED
    late = handle.cancel(CancelMode.AFTER_TOOLS)
    assert (late.mode, late.turn_id, late.contributed, late.done()) == (
        CancelMode.AFTER_TOOLS, handle.turn_id, False, True)
    await late.wait()
    await loop.aclose()


async def test_a_sub_turn_needs_a_task_and_a_failed_child_says_how_it_ended() -> None:
    from steerable.errors import SubturnError

    child = Agent(name="kid", provider=ScriptedProvider([Reply(error=RuntimeError("down"))]))
    errors: list[str] = []

    @tool(read_only=True)
    async def delegate(task: str, ctx: ToolContext) -> str:
        """Run a sub-turn."""
        try:
            result = await ctx.run_subturn(child, task)
        except SubturnError as exc:
            errors.append(str(exc))
            return "refused"
        return f"{result.status.value}: {result.error}"

    provider = ScriptedProvider([Reply(tool_calls=[("delegate", {"task": "  "}),
                                                   ("delegate", {"task": "help"})]),
                                 Reply(text="ok")])
    loop = AgentLoop(Agent(name="main", provider=provider, tools=[delegate]))
    result = await loop.run_turn("go", session_id="s")
    assert errors == ["a sub-turn needs a non-empty task text"]
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert contents[0] == "refused" and contents[1].startswith("error: ")
    await loop.aclose()


async def test_the_built_in_subagent_tool_reports_a_failed_child() -> None:
    child = Agent(name="kid", description="helps",
                  provider=ScriptedProvider([Reply(error=RuntimeError("down"))]))
    provider = ScriptedProvider([Reply(tool_calls=[("subagent", {"agent": "kid",
                                                                 "task": "help"})]),
                                 Reply(text="ok")])
    loop = AgentLoop(Agent(name="main", provider=provider, subagents=[child]))
    sub = loop.subscribe([K.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    (end,) = sub.drain_nowait()
    assert end.is_error and end.content.startswith("Sub-agent kid ended error: ")
    assert end.content == end.content.strip() and "down" in end.content
    await loop.aclose()


async def test_a_message_a_sub_turn_refuses_names_it_and_its_parent() -> None:
    gate = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Wait."""
        await gate.wait()
        return "slow done"

    child = Agent(name="kid", description="helps", tools=[slow], provider=ScriptedProvider(
        [Reply(tool_calls=[("slow", {})]), Reply(text="kid done")]))
    provider = ScriptedProvider([Reply(tool_calls=[("subagent", {"agent": "kid",
                                                                 "task": "help"})]),
                                 Reply(text="ok")])
    loop = AgentLoop(Agent(name="main", provider=provider, subagents=[child]),
                     limits=Limits(steering_queue=1, follow_up_queue=1))
    sub = loop.subscribe([K.SUBTURN_SPAWN, K.TOOL_EXEC_START])
    handle = loop.start_turn("go", session_id="s")
    spawn = await wait_for(sub, K.SUBTURN_SPAWN)
    while (await wait_for(sub, K.TOOL_EXEC_START)).turn_id != spawn.child_turn_id:
        pass  # until the child's own tool runs
    kid = loop.turn_handle(spawn.child_turn_id)
    assert kid is not None
    assert kid.inject_steering("one") and kid.inject_follow_up("later")
    sub2 = loop.subscribe([K.MESSAGE_STATE])
    for refused in (kid.inject_steering("two"), kid.inject_follow_up("much later")):
        assert not refused and refused.state is MessageState.REJECTED
        assert (refused.turn_id, refused.parent_turn_id) == (spawn.child_turn_id,
                                                              handle.turn_id)
    rejected = [(e.turn_id, e.parent_turn_id) for e in sub2.drain_nowait()
                if e.state is MessageState.REJECTED]
    assert rejected == [(spawn.child_turn_id, handle.turn_id)] * 2
    gate.set()
    assert (await handle).status is TurnStatus.COMPLETED
    await loop.aclose()


async def test_closing_the_loop_does_not_wait_past_its_grace_for_a_stubborn_turn() -> None:
    """A hook that swallows its cancellation does not hold the loop's close: the turn's hard
    abort leaves the hook behind, and ``aclose`` returns."""
    import time

    from steerable import HookAction, HookDecision

    entered, release = asyncio.Event(), asyncio.Event()

    class Stubborn:
        async def before_llm(self, ctx: Any) -> HookDecision:
            entered.set()
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    continue  # (what the test is about: never do this)
            return HookDecision(HookAction.CONTINUE)

    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="late")])))
    loop.register_hook(Stubborn())
    handle = loop.start_turn("go", session_id="s")
    await asyncio.wait_for(entered.wait(), 5)
    started = time.monotonic()
    await asyncio.wait_for(loop.aclose(grace=0.1), 5)
    assert time.monotonic() - started < 4
    release.set()
    await asyncio.wait_for(handle, 5)


async def test_a_handle_of_an_ended_turn_cancels_nothing_of_the_next_one() -> None:
    loop, gate = gated([Reply(text="first"), THREE, Reply(text="second")])
    sub = loop.subscribe()
    old = loop.start_turn("one", session_id="s")
    await old
    new = loop.start_turn("two", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    late = old.cancel(CancelMode.AFTER_TOOLS)
    assert late.contributed is False and late.turn_id == old.turn_id
    gate.set()
    assert (await new).status is TurnStatus.COMPLETED
    await loop.aclose()


async def test_the_subagent_tools_refuse_wrong_arguments_and_deliver_async_results() -> None:
    child = Agent(name="kid", description="helps",
                  provider=ScriptedProvider([Reply(text="kid says hi")]))
    provider = ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "nobody", "task": "x"}),
                          ("subagent", {"agent": "kid", "task": " "}),
                          ("spawn", {"agent": "kid", "task": "greet"})]),
        Reply(text="waiting"), Reply(text="got it")])
    loop = AgentLoop(Agent(name="main", provider=provider, subagents=[child]))
    sub = loop.subscribe([K.TOOL_EXEC_END, K.SUBTURN_SPAWN, K.SUBTURN_RESULT_DELIVERED])
    result = await loop.run_turn("go", session_id="s")
    await loop.wait_idle()
    events = sub.drain_nowait()
    ends = [(e.tool_name, e.is_error, e.content) for e in of(events, K.TOOL_EXEC_END)]
    assert ends[:2] == [
        ("subagent", True, "Unknown agent 'nobody' for tool 'subagent'. Valid agents: kid."),
        ("subagent", True, "Tool 'subagent' needs a non-empty 'task' text.")]
    (spawn,) = of(events, K.SUBTURN_SPAWN)
    delivered = of(events, K.SUBTURN_RESULT_DELIVERED)
    assert [(e.turn_id, e.child_turn_id, e.text) for e in delivered] == [
        (result.turn_id, spawn.child_turn_id, "kid says hi")]
    await loop.aclose()


def test_an_output_type_without_a_name_is_named_by_its_repr() -> None:
    agent = Agent(provider=ScriptedProvider([]), output_type=int | str)
    assert agent.output is not None and agent.output.name == "int | str"


async def test_steering_taken_in_but_never_sent_is_handed_back_when_the_turn_aborts() -> None:
    """A before_llm hook ends the turn (ABORT_TURN, no rollback) after the steer was taken
    into the context but before the request that would carry it: the turn hands it back as
    unprocessed, and it is RETURNED, not delivered."""
    from steerable import HookAction, HookDecision

    class StopSecond:
        calls = 0

        def before_llm(self, ctx: Any) -> HookDecision:
            StopSecond.calls += 1
            if StopSecond.calls == 2:
                return HookDecision(HookAction.ABORT_TURN, reason="enough")
            return HookDecision(HookAction.CONTINUE)

    loop, gate = gated([THREE, Reply(text="never")])
    loop.register_hook(StopSecond())
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    steer = loop.inject_steering("steer me", "s")
    gate.set()
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert [(q.kind, q.text, q.message_id) for q in result.unprocessed] == [
        ("steering", "steer me", steer.message_id)]
    assert steer.state is MessageState.RETURNED
    await loop.aclose()


async def test_a_turn_started_for_a_message_accepted_elsewhere_keeps_its_id() -> None:
    """A worker starts the turn of a message another process accepted (``StartTurn`` naming
    it): the turn's input keeps that id through its states."""
    from steerable.drivers._commands import StartTurn

    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="ok")])))
    sub = loop.subscribe([K.MESSAGE_STATE])
    handle = loop.submit(StartTurn("hello", "s", message_id="msg_from_elsewhere"))
    assert handle.message_id == "msg_from_elsewhere"
    await handle
    assert [(e.message_id, e.state) for e in sub.drain_nowait()] == [
        ("msg_from_elsewhere", MessageState.QUEUED),
        ("msg_from_elsewhere", MessageState.DELIVERED)]
    await loop.aclose()


async def test_steering_delivered_then_rolled_back_is_handed_back_with_its_text() -> None:
    gate, never = asyncio.Event(), asyncio.Event()

    @tool(read_only=True)
    async def first() -> str:
        """Wait for the gate."""
        await gate.wait()
        return "first done"

    @tool(read_only=True)
    async def second() -> str:
        """Wait until aborted."""
        await never.wait()
        return "unreachable"

    loop = AgentLoop(Agent(name="t", tools=[first, second], provider=ScriptedProvider(
        [Reply(tool_calls=[("first", {})]), Reply(tool_calls=[("second", {})])])))
    sub = loop.subscribe([K.TOOL_EXEC_START])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    steer = loop.inject_steering("steer me", "s")
    gate.set()
    await wait_for(sub, K.TOOL_EXEC_START)  # the steer was delivered; the second tool runs
    assert steer.state is MessageState.DELIVERED
    loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert [(q.kind, q.text, q.message_id) for q in result.unprocessed] == [
        ("steering", "steer me", steer.message_id)]
    await loop.aclose()


async def test_a_turn_that_only_wrote_has_its_usage() -> None:
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider(
        [Reply(text="hi", usage=Usage(0, 5))])))
    assert (await loop.run_turn("go", session_id="s")).usage == Usage(0, 5)
    await loop.aclose()


async def test_a_checkpoint_that_cannot_be_read_stops_a_new_turn_clearly() -> None:
    from steerable import InMemorySessionStore
    from steerable.errors import CheckpointError

    class Broken(InMemorySessionStore):
        def load_checkpoint(self, session_id: str) -> Any:
            raise CheckpointError("checkpoint file of session 's' is corrupt")

    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([])), store=Broken())
    with pytest.raises(CheckpointError) as refused:
        loop.start_turn("go", session_id="s")
    assert str(refused.value) == ("checkpoint file of session 's' is corrupt (session 's' "
                                  "cannot start a new turn until then)")
    await loop.aclose()
