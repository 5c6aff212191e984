"""What ``AgentLoop.statistics()`` counts comes back to zero: a closed subscription is no
longer a subscriber (nor fed), and a turn's active-turn slot is given back whatever order
the turns end in, so a later turn never waits on a slot nobody holds."""

from __future__ import annotations

import asyncio

from steerable import Agent, AgentLoop, EventKind, Limits, Reply, ScriptedProvider, TurnStatus
from steerable._core._bus import EventBus


async def test_a_closed_subscription_is_no_longer_counted_nor_listened_for() -> None:
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider([Reply(text="hi")])))
    base = loop.statistics().subscribers
    every = loop.subscribe()
    some = loop.subscribe([EventKind.TURN_END])
    assert loop.statistics().subscribers == base + 2
    some.close()
    some.close()  # idempotent
    assert loop.statistics().subscribers == base + 1
    every.close()
    assert loop.statistics().subscribers == base
    await loop.aclose()


def test_the_bus_stops_listening_for_the_kinds_of_a_closed_subscription() -> None:
    bus = EventBus()
    sub = bus.subscribe([EventKind.TURN_END])
    assert bus.listens(EventKind.TURN_END) and not bus.listens(EventKind.TURN_START)
    sub.close()
    assert not bus.listens(EventKind.TURN_END)
    assert bus.subscriber_count == 0


async def test_a_slot_freed_before_the_waiting_turn_first_runs_is_taken_by_it() -> None:
    """B is started while A holds the one slot; A is aborted before B's task first runs, so
    B finds the slot free. Both give it back: a third turn runs, and none is counted."""
    provider = ScriptedProvider([Reply(text="b"), Reply(text="c")])
    loop = AgentLoop(Agent(name="a", provider=provider), limits=Limits(active_turns=1))
    a = loop.start_turn("first", session_id="a")
    b = loop.start_turn("second", session_id="b")
    assert loop.statistics().active_turns == 1  # B waits for A's slot
    loop.interrupt_hard("a")
    assert (await a).status is TurnStatus.ABORTED
    assert (await b).status is TurnStatus.COMPLETED
    assert loop.statistics().active_turns == 0
    c = await asyncio.wait_for(loop.start_turn("third", session_id="c"), 5)
    assert c.status is TurnStatus.COMPLETED and c.text == "c"
    assert loop.statistics().active_turns == 0
    await loop.aclose()
