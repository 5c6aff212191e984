"""One rule for the top-level session of an event (the server's channels, Redis streams)."""

from __future__ import annotations

from typing import Any

from steerable import EventKind, TurnStatus
from steerable._events import EVENT_CLASSES
from steerable.drivers._top_session import TopSessions


def ev(kind: EventKind, turn: str, session: str, parent: str | None = None, **fields: Any) -> Any:
    defaults: dict[EventKind, dict[str, Any]] = {
        EventKind.TURN_START: {"input": "x", "agent": "a"},
        EventKind.TURN_END: {"status": TurnStatus.COMPLETED, "text": "", "iterations": 1},
        EventKind.STEERING_INJECTED: {"text": "s"},
    }
    return EVENT_CLASSES[kind](turn_id=turn, parent_turn_id=parent, session_id=session, seq=0,
                               time=0.0, **(defaults[kind] | fields))


def test_a_child_reports_to_its_top_session_even_after_its_parent_ended() -> None:
    top = TopSessions()
    assert top(ev(EventKind.TURN_START, "p", "main")) == "main"
    assert top(ev(EventKind.TURN_START, "c", "ephemeral-1", parent="p")) == "main"
    assert top.place(ev(EventKind.TURN_START, "g", "ephemeral-2", parent="c")) == ("main", "p")
    assert top(ev(EventKind.TURN_END, "p", "main")) == "main"
    # The async child outlives its parent: still the top session's.
    assert top(ev(EventKind.STEERING_INJECTED, "c", "ephemeral-1", parent="p")) == "main"
    assert top(ev(EventKind.TURN_END, "g", "ephemeral-2", parent="c")) == "main"
    assert top(ev(EventKind.TURN_END, "c", "ephemeral-1", parent="p")) == "main"
    assert top._of == {}  # nothing kept for ended turns
    assert top(ev(EventKind.STEERING_INJECTED, "", "")) == ""  # a loop-wide notice
    assert top(ev(EventKind.STEERING_INJECTED, "other", "s2")) == "s2"
