"""An observer hook with ``event_kinds`` is sent only those kinds; without it, every event."""

from __future__ import annotations

from typing import Any

from steerable import EventKind, Reply

from .conftest import make_loop


class Seen:
    def __init__(self, kinds: set[EventKind] | None = None) -> None:
        self.events: list[Any] = []
        if kinds is not None:
            self.event_kinds = frozenset(kinds)

    def on_event(self, event: Any) -> None:
        self.events.append(event.kind)


async def test_observer_kinds_filter_what_it_is_sent() -> None:
    loop, _, _ = make_loop([Reply(text="hello there")])
    picky, everything = Seen({EventKind.TURN_START, EventKind.TURN_END}), Seen()
    loop.register_hook(picky)
    loop.register_hook(everything)
    await loop.run_turn("hi", session_id="s1")
    await loop.aclose()
    assert picky.events == [EventKind.TURN_START, EventKind.TURN_END]
    assert EventKind.LLM_DELTA in everything.events and len(everything.events) > 5
