"""Full steering and follow-up queues refuse with a reason; what a subscription says about
itself; closing one from another thread ends its iteration."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Limits,
    MessageState,
    Reply,
    ScriptedProvider,
    TurnStatus,
)
from tests.conftest import of, wait_for

K = EventKind


def gated_loop(**loop_kw: Any) -> tuple[AgentLoop, asyncio.Event]:
    gate = asyncio.Event()

    async def slow(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="answer")

    loop = AgentLoop(Agent(provider=ScriptedProvider([slow, Reply(text="more"),
                                                      Reply(text="after")])), **loop_kw)
    return loop, gate


async def test_full_queues_refuse_with_an_error_on_the_turn() -> None:
    loop, gate = gated_loop(limits=Limits(steering_queue=1, follow_up_queue=1))
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    start = await wait_for(sub, K.TURN_START)
    assert loop.inject_steering("one", "s")
    refused_steer = loop.inject_steering("two", "s")
    assert loop.inject_follow_up("later", "s")
    refused_follow_up = loop.inject_follow_up("much later", "s")
    gate.set()
    await handle
    # A refused message still names the turn that refused it (receipt and REJECTED event).
    for r, kind in ((refused_steer, "steer"), (refused_follow_up, "follow_up")):
        assert not r and (r.kind, r.state, r.session_id) == (kind, MessageState.REJECTED, "s")
        assert (r.turn_id, r.parent_turn_id) == (start.turn_id, None)
    events = sub.drain_nowait()
    rejected = [(e.message_id, e.turn_id, e.detail) for e in of(events, K.MESSAGE_STATE)
                if e.state is MessageState.REJECTED]
    assert rejected == [
        (refused_steer.message_id, start.turn_id, "steering queue full (1 messages)"),
        (refused_follow_up.message_id, start.turn_id, "follow-up queue full (1 messages)")]
    errors = of(events, K.ERROR)
    assert [(e.message, e.source, e.turn_id) for e in errors] == [
        ("steering queue full (1 messages); message refused", "queue", start.turn_id),
        ("follow-up queue full (1 messages); message refused", "queue", start.turn_id)]


async def test_no_follow_up_or_graceful_interrupt_for_a_turn_being_hard_aborted() -> None:
    loop, gate = gated_loop()
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    start = await wait_for(sub, K.TURN_START)
    turn = loop.turn_handle(start.turn_id)
    assert turn is not None
    assert turn.interrupt_graceful("wrap it up") is True
    assert turn.interrupt_graceful("again") is False
    interrupted = await wait_for(sub, K.INTERRUPT_RECEIVED)
    assert (interrupted.mode, interrupted.hint, interrupted.turn_id) == (
        "graceful", "wrap it up", start.turn_id)
    loop.interrupt_hard("s")
    assert not turn.inject_follow_up("too late")
    assert (await handle).status is TurnStatus.ABORTED
    assert not of(sub.drain_nowait(), K.FOLLOW_UP_QUEUED)
    gate.set()


async def test_a_subscription_describes_itself() -> None:
    loop = AgentLoop(Agent(provider=ScriptedProvider([])))
    every = loop.subscribe(buffer=5)
    some = loop.subscribe(kinds=[K.TURN_END, K.ERROR])
    assert repr(every) == "<Subscription kinds=all buffered=0 closed=False>"
    assert repr(some) == "<Subscription kinds=error,turn_end buffered=0 closed=False>"
    some.close()
    assert repr(some) == "<Subscription kinds=error,turn_end buffered=0 closed=True>"
    await loop.aclose()


async def test_closing_a_subscription_from_another_thread_ends_its_iteration() -> None:
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="hi")])))
    sub = loop.subscribe()
    await loop.run_turn("go", session_id="s")
    seen: list[Any] = []

    async def read() -> None:
        async for event in sub:
            seen.append(event.kind)

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)
    closer = threading.Thread(target=sub.close)
    closer.start()
    await asyncio.to_thread(closer.join)
    await asyncio.wait_for(reader, 5)  # ends: the close reached the loop's thread
    assert seen[0] is K.TURN_START and seen[-1] is K.TURN_END and sub.closed
    await loop.aclose()
