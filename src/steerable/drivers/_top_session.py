"""Which top-level session an event belongs to: one rule for every follower of events.

A sub-turn runs in a session of its own (an ephemeral one, or the one its tool named), but
its events belong to the session of the top-level turn that spawned it: that is where a
person watches (the server's page, a Redis follower). A turn's top-level session is fixed as
the turn starts (its parent's, or its own at top level) and kept until it ends, so an
asynchronous child that outlives its parent still reports to the right session.
"""

from __future__ import annotations

from steerable._events import Event, EventKind

__all__ = ["TopSessions"]


class TopSessions:
    """Call it with each event, in order; it answers the event's top-level session ("" for a
    loop-wide notice). ``place`` answers the top-level turn too."""

    def __init__(self) -> None:
        self._of: dict[str, tuple[str, str]] = {}
        """Running turn id -> (its top-level session, its top-level turn)."""

    def place(self, event: Event) -> tuple[str, str]:
        """(top-level session, top-level turn id) of ``event``."""
        top = self._of.get(event.turn_id)
        if top is None:
            own = (event.session_id, event.turn_id)
            parent = event.parent_turn_id
            top = self._of.get(parent, own) if parent else own
            if event.kind is EventKind.TURN_START:
                self._of[event.turn_id] = top
        if event.kind is EventKind.TURN_END:
            self._of.pop(event.turn_id, None)
        return top

    def __call__(self, event: Event) -> str:
        return self.place(event)[0]
