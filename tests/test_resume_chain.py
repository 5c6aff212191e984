"""A turn resumed more than once stays one turn: its origin, its creation time and its input
carry over every resume, and each resumed run is a new turn id."""

from __future__ import annotations

import asyncio

import pytest

from steerable import CancelMode, EventKind, InMemorySessionStore, Reply, TurnStatus
from steerable.errors import SessionBusyError
from tests.conftest import of, wait_for
from tests.test_resume import Tools, calls, make

K = EventKind


async def test_a_turn_cancelled_twice_keeps_its_origin_across_both_resumes() -> None:
    store = InMemorySessionStore()
    tools = Tools()
    gates = [tools.gates.setdefault(n, asyncio.Event()) for n in ("a1", "a2")]

    first, _ = make(store, [calls(("act", "a1"))], tools)
    sub = first.subscribe()
    handle = first.start_turn("the task", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    first.cancel("s", mode=CancelMode.AFTER_MODEL)
    gates[0].set()
    origin = await handle
    assert origin.status is TurnStatus.CANCELLED
    cp1 = first.checkpoint("s")
    assert cp1 is not None and (cp1.turn_id, cp1.origin_turn_id) == (origin.turn_id,
                                                                     origin.turn_id)
    await first.aclose()

    second, _ = make(store, [calls(("act", "a2"))], tools)
    sub2 = second.subscribe()
    again = second.resume("s")
    assert again is not None
    start = await wait_for(sub2, K.TURN_START)
    assert start.input == "the task" and start.turn_id.startswith("turn_")
    assert start.turn_id not in (origin.turn_id, "")
    await wait_for(sub2, K.TOOL_EXEC_START)
    with pytest.raises(SessionBusyError):
        second.resume("s")  # the session's turn is running
    second.cancel("s", mode=CancelMode.AFTER_MODEL)
    gates[1].set()
    middle = await again
    assert middle.status is TurnStatus.CANCELLED
    cp2 = second.checkpoint("s")
    assert cp2 is not None
    assert (cp2.turn_id, cp2.origin_turn_id, cp2.created, cp2.input) == (
        middle.turn_id, origin.turn_id, cp1.created, "the task")
    assert cp2.checkpoint_id.startswith(origin.turn_id + ".") and cp2.seq > cp1.seq
    await second.aclose()

    third, provider = make(store, [Reply(text="finished")], tools)
    last = await third.resume("s")  # type: ignore[misc]
    assert last.status is TurnStatus.COMPLETED and last.resumed_from == middle.turn_id
    assert [m.content for m in provider.requests[0].messages if m.role == "user"] == ["the task"]
    assert tools.names() == ["a1", "a2"]


async def test_resume_refuses_what_is_not_an_agent() -> None:
    loop, _ = make(InMemorySessionStore(), [], Tools())
    with pytest.raises(TypeError, match="agent must be an agent, got int"):
        loop.resume("s", agent=5)  # type: ignore[arg-type]
    assert loop.resume("s") is None  # nothing pending
