"""A registered observer that offers ``on_event_nowait`` is called inside ``emit`` (no
subscription, no task), in seq order and none dropped; one that raises is reported as an ERROR
event and still called; ``aclose`` awaits its ``flush``."""

from __future__ import annotations

import asyncio
from typing import Any

from steerable import EventKind, Reply

from .conftest import make_loop


class Inline:
    def __init__(self, loop: Any, kinds: set[EventKind] | None = None, fail_on: int = 0) -> None:
        self.loop = loop
        self.seen: list[Any] = []
        self.lagging = 0
        self.async_calls = 0
        self.flushed = False
        self.fail_on = fail_on
        if kinds is not None:
            self.event_kinds = frozenset(kinds)

    async def on_event(self, event: Any) -> None:
        self.async_calls += 1

    def on_event_nowait(self, event: Any) -> None:
        # Inside emit: no event has been numbered after this one yet.
        self.lagging += self.loop._engine.bus.last_seq != event.seq
        self.seen.append(event)
        if len(self.seen) == self.fail_on:
            raise RuntimeError("observer broke")

    async def flush(self) -> None:
        await asyncio.sleep(0.01)
        self.flushed = True


async def test_a_nowait_observer_is_called_inside_emit_in_seq_order() -> None:
    loop, _, _ = make_loop([Reply(text="hello there")])
    everything = Inline(loop)
    picky = Inline(loop, {EventKind.TURN_START, EventKind.TURN_END})
    loop.register_hook(everything)
    loop.register_hook(picky)
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("hi", session_id="s1")
    await loop.aclose()
    expected = [e async for e in sub]
    assert [e.seq for e in everything.seen] == [e.seq for e in expected]
    assert everything.lagging == 0 and everything.async_calls == 0
    assert [e.kind for e in picky.seen] == [EventKind.TURN_START, EventKind.TURN_END]
    assert everything.flushed and picky.flushed  # aclose waited for both


async def test_a_nowait_observer_that_raises_is_reported_and_still_called() -> None:
    loop, _, _ = make_loop([Reply(text="one"), Reply(text="two")])
    hook = Inline(loop, fail_on=2)
    loop.register_hook(hook)
    errors = loop.subscribe([EventKind.ERROR])
    first = await loop.run_turn("a", session_id="s1")
    seen_after_first = len(hook.seen)
    second = await loop.run_turn("b", session_id="s1")
    await loop.aclose()
    reports = [e async for e in errors]
    assert first.status.value == "completed" and second.status.value == "completed"
    assert [e.source for e in reports] == ["observer"]
    assert "on_event_nowait raised RuntimeError: observer broke" in reports[0].message
    assert reports[0].turn_id == hook.seen[1].turn_id
    assert len(hook.seen) > seen_after_first  # still called after it raised


async def test_unregistered_it_is_called_no_more() -> None:
    loop, _, _ = make_loop([Reply(text="one"), Reply(text="two")])
    hook = Inline(loop)
    unregister = loop.register_hook(hook)
    await loop.run_turn("a", session_id="s1")
    count = len(hook.seen)
    assert unregister()
    await loop.run_turn("b", session_id="s1")
    await loop.aclose()
    assert len(hook.seen) == count and not hook.flushed
