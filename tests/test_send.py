"""``AgentLoop.send``: busy-session policies, follow-ups in order, the active-turn bound."""

from __future__ import annotations

import asyncio

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Limits,
    Reply,
    ScriptedProvider,
    TurnHandle,
    TurnStatus,
    tool,
)
from steerable.errors import ConfigurationError, SessionBusyError
from tests.conftest import assert_history_consistent, of, wait_for

K = EventKind


def gated() -> tuple[list, asyncio.Event]:
    gate = asyncio.Event()

    @tool
    async def work(step: str) -> str:
        """A mutating step that waits for the gate."""
        await gate.wait()
        return f"did {step}"

    return [work], gate


def echo(request) -> Reply:
    """Answers with the last user message, so each turn's reply names its input."""
    users = [m.content for m in request.messages if m.role == "user"]
    return Reply(text=f"re: {users[-1]}")


def make(script, tools=(), **loop_kw) -> tuple[AgentLoop, ScriptedProvider]:
    provider = ScriptedProvider(script)
    agent = Agent(name="t", instructions="test", provider=provider, tools=list(tools))
    return AgentLoop(agent, **loop_kw), provider


def contents(loop: AgentLoop, sid: str) -> list[str]:
    return [m.content for m in loop.session_messages(sid) if m.role in ("user", "assistant")
            and m.content]


async def test_idle_session_starts_a_turn_and_returns_its_handle() -> None:
    loop, _ = make([echo])
    sent = loop.send("hello", "s")
    assert isinstance(sent, TurnHandle) and sent.action == "started"
    result = await sent
    assert result.text == "re: hello" and result.turn_id == sent.turn_id
    assert loop.busy("s") is False
    await loop.aclose()


async def test_steer_policy_injects_into_the_running_turn() -> None:
    tools, gate = gated()
    loop, provider = make([Reply(tool_calls=[("work", {"step": "a"})]), echo], tools)
    sub = loop.subscribe(buffer=1000)
    first = loop.send("start", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    steered = loop.send("also this", "s")  # the loop's default policy: steer
    assert steered.action == "steered" and steered.turn_id == first.turn_id
    gate.set()
    result = await steered
    assert result.turn_id == first.turn_id and result.text == "re: also this"
    assert [e.text for e in of(sub.drain_nowait(), K.STEERING_INJECTED)] == ["also this"]
    assert len(provider.requests) == 2
    await loop.aclose()


async def test_follow_ups_run_in_order_one_turn_at_a_time_after_each_save() -> None:
    tools, gate = gated()
    saved_at_call: list[int] = []

    def echo_counting(request) -> Reply:
        saved_at_call.append(len(loop.session_messages("s")))
        return echo(request)

    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo] + [echo_counting] * 3,
                   tools)
    sub = loop.subscribe(buffer=1000)
    loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    queued = [loop.send(f"then {i}", "s", "follow_up") for i in range(3)]
    assert [q.action for q in queued] == ["queued"] * 3 and all(q.turn_id is None for q in queued)
    assert loop.queued("s") == ["then 0", "then 1", "then 2"]
    gate.set()
    for q in queued:
        result = await q
        assert result.text == f"re: {q.text}" and q.turn_id == result.turn_id
    await loop.wait_session("s")
    seen = sub.drain_nowait()
    starts_ends = [e.kind for e in seen if e.kind in (K.TURN_START, K.TURN_END)]
    assert starts_ends == [K.TURN_END] + [K.TURN_START, K.TURN_END] * 3  # never two at once
    assert [e.text for e in of(seen, K.FOLLOW_UP_QUEUED)] == ["then 0", "then 1", "then 2"]
    # each follow-up's turn began after the turn before had been saved (4 messages for the
    # first turn: user, call, result, answer; then 2 per follow-up)
    assert saved_at_call == [4, 6, 8]
    assert contents(loop, "s") == ["first", "re: first", "then 0", "re: then 0", "then 1",
                                   "re: then 1", "then 2", "re: then 2"]
    await loop.aclose()


async def test_follow_up_queued_is_announced_on_the_running_turn() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo, echo], tools)
    sub = loop.subscribe(buffer=1000)
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.send("later", "s", "follow_up")
    event = await wait_for(sub, K.FOLLOW_UP_QUEUED)
    assert event.text == "later" and event.turn_id == first.turn_id
    gate.set()
    await loop.wait_session("s")
    await loop.aclose()


async def test_interrupt_policy_ends_the_turn_gracefully_then_runs_the_message_first() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"}), ("work", {"step": "b"})]),
                    Reply(text="summed up"), echo, echo], tools)
    sub = loop.subscribe(buffer=1000)
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    later = loop.send("queued earlier", "s", "follow_up")
    urgent = loop.send("do this instead", "s", "interrupt")
    assert urgent.action == "interrupted"
    assert loop.queued("s") == ["do this instead", "queued earlier"]
    gate.set()
    assert (await first).status is TurnStatus.INTERRUPTED
    assert (await urgent).text == "re: do this instead"
    assert (await later).text == "re: queued earlier"
    assert contents(loop, "s")[-4:] == ["do this instead", "re: do this instead",
                                        "queued earlier", "re: queued earlier"]
    await loop.aclose()


async def test_rollback_policy_aborts_rolls_back_and_runs_the_message() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo], tools)
    sub = loop.subscribe(buffer=1000)
    first = loop.send("doomed", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    sent = loop.send("start over", "s", "rollback")
    assert sent.action == "rolled_back"
    assert (await first).status is TurnStatus.ABORTED
    assert (await sent).text == "re: start over"
    assert contents(loop, "s") == ["start over", "re: start over"]  # nothing of the first
    assert_history_consistent(loop.session_messages("s"))
    await loop.aclose()


async def test_reject_policy_raises_and_queues_nothing() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo], tools, busy_policy="reject")
    sub = loop.subscribe(buffer=1000)
    first = loop.send("only me", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    with pytest.raises(SessionBusyError, match="busy"):
        loop.send("me too", "s")
    with pytest.raises(SessionBusyError):
        loop.send("me too", "s", "reject")
    assert loop.queued("s") == []
    gate.set()
    await first
    await loop.wait_session("s")
    assert contents(loop, "s") == ["only me", "re: only me"]
    await loop.aclose()


async def test_steer_falls_back_to_a_queued_turn_when_the_queue_is_full() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo, echo], tools,
                   limits=Limits(steering_queue=1))
    sub = loop.subscribe(buffer=1000)
    loop.send("start", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.send("one", "s").action == "steered"
    overflow = loop.send("two", "s")
    assert overflow.action == "queued"  # refused by the full steering queue, not lost
    gate.set()
    assert (await overflow).text == "re: two"
    await loop.aclose()


async def test_follow_ups_a_turn_hands_back_run_before_queued_messages() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo, echo, echo], tools)
    sub = loop.subscribe(buffer=1000)
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.inject_follow_up("engine follow-up", "s")
    loop.send("send follow-up", "s", "follow_up")
    gate.set()
    await first
    await loop.wait_session("s")
    assert contents(loop, "s")[2:] == ["engine follow-up", "re: engine follow-up",
                                       "send follow-up", "re: send follow-up"]
    await loop.aclose()


async def test_active_turns_limit_queues_new_sessions_until_a_slot_frees() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo, echo], tools,
                   limits=Limits(active_turns=1))
    sub = loop.subscribe(buffer=1000)
    a = loop.send("a", "s1")
    await wait_for(sub, K.TOOL_EXEC_START)
    b = loop.send("b", "s2")
    assert b.action == "queued" and loop.busy("s2")
    await asyncio.sleep(0.05)
    assert loop.active_turn("s2") is None  # waits for the slot
    gate.set()
    assert (await a).status is TurnStatus.COMPLETED
    assert (await b).text == "re: b"
    await loop.aclose()


async def test_bad_arguments_are_refused() -> None:
    loop, _ = make([echo])
    with pytest.raises(ValueError, match="unknown busy policy"):
        loop.send("x", "s", "shout")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        loop.send("  ", "s")
    with pytest.raises(ValueError, match="session_id"):
        loop.send("x", "")
    with pytest.raises(ConfigurationError, match="busy policy"):
        make([echo], busy_policy="sometimes")
    await loop.aclose()


async def test_closing_the_loop_fails_waiting_messages_instead_of_hanging() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})])], tools)
    sub = loop.subscribe(buffer=1000)
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    waiting = loop.send("never runs", "s", "follow_up")
    await loop.aclose()
    assert (await first).status is TurnStatus.ABORTED
    with pytest.raises(RuntimeError, match="closed"):
        await waiting


async def test_a_message_for_a_busy_session_is_refused_while_the_loop_closes() -> None:
    """Between the lanes closing and the turns ending, ``send`` to a busy session raises: a
    message queued then would never run and never be answered."""
    stuck = asyncio.Event()

    @tool
    async def slow() -> str:
        """A step that takes a while to give up when cancelled."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await stuck.wait()
            raise
        return "never"

    loop, _ = make([Reply(tool_calls=[("slow", {})])], [slow])
    sub = loop.subscribe(buffer=1000)
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    closing = asyncio.ensure_future(loop.aclose(grace=5))
    await wait_for(sub, K.INTERRUPT_RECEIVED)  # aclose is under way: the turn is aborting
    with pytest.raises(RuntimeError, match=r"^this AgentLoop is closed$"):
        loop.send("too late", "s", "follow_up")
    stuck.set()
    await closing
    assert (await first).status is TurnStatus.ABORTED


async def test_send_from_another_thread() -> None:
    loop, _ = make([echo, echo])
    first = loop.send("warm up", "s")
    await first
    sent = await asyncio.to_thread(loop.send, "from a thread", "s")
    assert (await sent).text == "re: from a thread"
    await loop.aclose()
