"""The inbox: every message not yet terminal, and the one place a message changes state.

``Inbox.settle`` is the only writer of a receipt's terminal state, and it refuses a second
one: whatever paths a message takes (a turn ending while a revoke arrives, a resume after a
crash), it reaches exactly one terminal state and one event says so. Receipts leave the inbox
when they become terminal, so it holds only what is queued now.

Runs on the loop's thread only (the AgentLoop marshals calls from other threads).
"""

from __future__ import annotations

import time

from steerable._core._bus import EventBus
from steerable._events import EventKind, MessageStateEvent
from steerable._receipts import MessageInfo, MessageReceipt, MessageState

__all__ = ["Inbox"]

_KIND = EventKind.MESSAGE_STATE


class Inbox:
    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self.live: dict[str, MessageReceipt] = {}
        """Accepted messages not yet terminal, by id, in the order they were accepted."""

    def _emit(self, r: MessageReceipt, request_seq: int | None = None) -> None:
        bus = self._bus
        seq = bus.next_seq()
        if not bus.listens(_KIND):
            bus.emitted += 1  # as Engine.emit: counted and numbered, never built
            return
        bus.emit(MessageStateEvent(
            turn_id=r.turn_id or "", parent_turn_id=r.parent_turn_id, session_id=r.session_id,
            seq=seq, time=time.time(), message_id=r.message_id, state=r.state,
            detail=r.detail, message_kind=r.kind, text=r.text, origin_id=r.origin_id,
            request_seq=request_seq))

    def enqueue(self, r: MessageReceipt, detail: str = "") -> MessageReceipt:
        """Accept ``r``: it is queued now (``QUEUED`` event)."""
        r.detail = detail
        self.live[r.message_id] = r
        self._emit(r)
        return r

    def adopt(self, r: MessageReceipt) -> None:
        """Take in a queued message without an event: one restored from a checkpoint (its
        ``QUEUED`` event was emitted by the process that accepted it)."""
        self.live[r.message_id] = r

    def reject(self, r: MessageReceipt, reason: str) -> MessageReceipt:
        """Refuse ``r`` as it is given: its receipt is falsy."""
        r.accepted = False
        self.settle(r, MessageState.REJECTED, reason)
        return r

    def settle(self, r: MessageReceipt, state: MessageState, detail: str = "",
               request_seq: int | None = None) -> bool:
        """Move ``r`` to the terminal ``state``; False (and nothing emitted) if it already is."""
        if r.state.terminal:
            return False
        r.state = state
        r.detail = detail
        r._holder = None
        self.live.pop(r.message_id, None)
        self._emit(r, request_seq)
        return True

    def revoke(self, message_id: str) -> bool:
        r = self.live.get(message_id)
        holder = None if r is None else r._holder
        if r is None or holder is None or not holder.withdraw(r):
            return False
        return self.settle(r, MessageState.REVOKED, "withdrawn by the caller")

    def edit(self, message_id: str, text: str) -> bool:
        r = self.live.get(message_id)
        holder = None if r is None else r._holder
        if r is None or holder is None:
            return False
        r.text = text  # the holder's queue holds the receipt itself: it reads the new text
        holder.edited()
        r.detail = "edited"
        self._emit(r)
        return True

    def queued(self, session_id: str) -> list[MessageInfo]:
        return [r.info() for r in self.live.values() if r.session_id == session_id]
