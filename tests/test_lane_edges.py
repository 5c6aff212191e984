"""Lane edges: every message a lane holds reaches a terminal state even when its turn cannot
start; follow-ups a turn hands back stay revocable while they wait; a message sent to steer a
turn fails its awaitable when that turn does not finish; a follow-up named for one of two
running sessions reaches that one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    InMemorySessionStore,
    Limits,
    MessageState,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from tests.conftest import wait_for

K = EventKind


def gated(script: list[Any], **loop_kw: Any) -> tuple[AgentLoop, asyncio.Event]:
    gate = asyncio.Event()

    @tool
    async def work(step: str) -> str:
        """A step that waits for the gate."""
        await gate.wait()
        return f"did {step}"

    agent = Agent(name="t", provider=ScriptedProvider(script), tools=[work])
    return AgentLoop(agent, **loop_kw), gate


def work(step: str) -> Reply:
    return Reply(tool_calls=[("work", {"step": step})])


async def test_every_message_queued_behind_a_cancelled_turn_is_rejected() -> None:
    """The cancelled turn keeps its checkpoint, so no queued message can start a turn: each
    one is rejected with the reason, none is left queued."""
    loop, gate = gated([work("a")], store=InMemorySessionStore())
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    queued = [loop.send(t, "s", "follow_up") for t in ("second", "third", "fourth")]
    loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    gate.set()
    assert (await first).status is TurnStatus.CANCELLED  # type: ignore[misc]
    await asyncio.wait_for(loop.wait_session("s"), 5)
    for item in queued:
        assert item.state is MessageState.REJECTED
        with pytest.raises(Exception, match="pending turn"):
            await item  # type: ignore[misc]
    assert loop.queued("s") == [] and not loop.busy("s")
    cp = loop.checkpoint("s")
    assert cp is not None and (cp.held, cp.held_ids) == ((), ())  # out of the checkpoint
    await loop.aclose()


async def test_a_handed_back_follow_up_waiting_for_a_slot_can_be_revoked() -> None:
    """A's turn (started by its lane) ends with a follow-up while B waits for the only slot:
    the slot goes to B, and the follow-up waits in A's lane, revocable like any queued
    message."""
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def step(name: str) -> str:
        """A step that waits for its gate."""
        await gates[name].wait()
        return f"did {name}"

    script = [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="a done"),
              Reply(tool_calls=[("step", {"name": "b"})]), Reply(text="b done")]
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider(script), tools=[step]),
                     limits=Limits(active_turns=1))
    sub = loop.subscribe()
    a = loop.send("a", "a")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.inject_follow_up("later for a", "a")
    b = loop.start_turn("b", session_id="b")
    await asyncio.sleep(0)  # B's task runs: it waits for A's slot
    gates["a"].set()
    assert (await a).follow_ups == ("later for a",)  # type: ignore[misc]
    await wait_for(sub, K.TOOL_EXEC_START)  # B runs; A's follow-up waits for the slot
    (waiting,) = loop.queued_messages("a")
    assert (waiting.text, waiting.state) == ("later for a", MessageState.QUEUED)
    assert loop.edit_message(waiting.message_id, "later, edited")
    assert loop.queued("a") == ["later, edited"]
    assert loop.revoke_message(waiting.message_id)
    assert loop.queued_messages("a") == [] and loop.queued("a") == []
    gates["b"].set()
    assert (await b).status is TurnStatus.COMPLETED
    await loop.wait_session("a")
    await loop.aclose()


async def test_a_steered_message_fails_when_its_turn_task_is_cancelled() -> None:
    """A framework cancelling the turn's task before it first runs (nothing the loop can
    catch): the message steered into it fails instead of waiting for ever."""
    loop, _gate = gated([work("a")])
    first = loop.send("first", "s")
    steered = loop.send("also", "s", "steer")
    assert steered.action == "steered"
    first._task.cancel()  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match=r"^the steered turn did not finish$"):
        await asyncio.wait_for(steered, 5)  # type: ignore[arg-type]
    await loop.aclose()


async def test_a_follow_up_for_one_of_two_running_sessions_reaches_that_one() -> None:
    loop, gate = gated([work("x"), work("y"), Reply(text="1"), Reply(text="2")])
    sub = loop.subscribe()
    one = loop.start_turn("one", session_id="one")
    two = loop.start_turn("two", session_id="two")
    await wait_for(sub, K.TOOL_EXEC_START)
    await wait_for(sub, K.TOOL_EXEC_START)
    r = loop.inject_follow_up("for two", "two")
    assert r and r.session_id == "two" and r.turn_id == two.turn_id
    s = loop.inject_steering("steer one", "one")
    assert s and s.session_id == "one" and s.turn_id == one.turn_id
    gate.set()
    assert (await two).follow_ups == ("for two",)
    assert (await one).follow_ups == ()
    await loop.aclose()
