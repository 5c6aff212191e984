"""Messages given to the loop and where each one is: its id, its kind, its state (SPEC 10).

Every message a person or a channel hands the loop (``send``, ``inject_steering``,
``inject_follow_up``) gets a ``MessageReceipt``. The receipt is the loop's own record of the
message, updated in place as the message moves: ``QUEUED`` while it waits, then exactly one
terminal state. A refused message's receipt is falsy (``REJECTED`` at once), so
``if loop.inject_steering(...)`` reads as it did when the answer was a bool.

The receipt is written only on the loop's thread; reading ``.state`` from any thread is safe
(one attribute read).
"""

from __future__ import annotations

import enum
from typing import Literal, Protocol

from steerable._ids import random_hex
from steerable._parts import Content, Part
from steerable._records import Record, record

__all__ = ["MessageHolder", "MessageInfo", "MessageKind", "MessageReceipt", "MessageState",
           "new_message_id"]

MessageKind = Literal["steer", "follow_up", "send"]


class MessageState(enum.StrEnum):
    QUEUED = "queued"
    """Accepted, waiting: in a turn's steering or follow-up queue, or for a turn of its own."""
    DELIVERED = "delivered"
    """In the context of an LLM call (the ``MESSAGE_STATE`` event names the turn and the
    ``LLM_REQUEST`` seq that carried it). Terminal."""
    RETURNED = "returned"
    """Its turn ended before it could be delivered: handed back in the ``TurnResult``
    (``unprocessed``, or ``follow_ups`` for a completed turn). A driver that runs it later gives
    it a new message linked by ``origin_id``. Terminal."""
    REJECTED = "rejected"
    """Refused (``detail`` says why): when given, or later (the loop closed). Terminal."""
    REVOKED = "revoked"
    """Withdrawn by the caller while it was queued. Terminal."""

    @property
    def terminal(self) -> bool:
        return self is not MessageState.QUEUED


def new_message_id() -> str:
    """96 random bits: unique within any store without coordination between processes."""
    return f"msg_{random_hex(12)}"


class MessageHolder(Protocol):
    """Whoever keeps a queued message where it can still be changed: a turn's steering or
    follow-up queue, a session's lane."""

    def withdraw(self, receipt: MessageReceipt) -> bool:
        """Take the message out of its queue (revoke); False if it is no longer there."""
        ...

    def edited(self) -> None:
        """A message it holds changed its text (the receipt itself, which its queue holds):
        keep what is stored of them in step."""
        ...


class MessageReceipt:
    """A message the loop was given. Truthy when it was accepted.

    ``state`` is live: it moves from ``QUEUED`` to one terminal state and then never changes.
    ``turn_id`` names the turn that holds (or took) the message once there is one;
    ``origin_id`` the message this one re-runs (a follow-up handed back by its turn).
    """

    __slots__ = ("_holder", "accepted", "detail", "kind", "message_id", "origin_id",
                 "parent_turn_id", "parts", "session_id", "state", "text", "turn_id")

    def __init__(self, kind: MessageKind, text: str, session_id: str, *,
                 turn_id: str | None = None, parent_turn_id: str | None = None,
                 origin_id: str | None = None, message_id: str | None = None,
                 parts: tuple[Part, ...] = ()) -> None:
        self.message_id = message_id or new_message_id()
        self.kind: MessageKind = kind
        self.text = text
        """The message as text (for parts: their text view, see ``Message.text``)."""
        self.parts = parts
        """The message's content parts when it has images or files (else empty)."""
        self.session_id = session_id
        self.turn_id = turn_id
        self.parent_turn_id = parent_turn_id
        self.origin_id = origin_id
        self.state = MessageState.QUEUED
        self.detail = ""
        self.accepted = True
        self._holder: MessageHolder | None = None
        """Set while the message sits in a queue it can be taken out of (revoke, edit)."""

    def __bool__(self) -> bool:
        return self.accepted

    def content(self) -> Content:
        """What the message says: its parts when it has any, else its text."""
        return self.parts or self.text

    def info(self) -> MessageInfo:
        return MessageInfo(message_id=self.message_id, kind=self.kind, text=self.text,
                           state=self.state, session_id=self.session_id, turn_id=self.turn_id,
                           origin_id=self.origin_id)

    def __repr__(self) -> str:
        return (f"<MessageReceipt {self.message_id} {self.kind} {self.state.value}"
                f" session={self.session_id} turn={self.turn_id}>")


@record
class MessageInfo(Record):
    """A snapshot of a message that is not yet terminal (``AgentLoop.queued_messages``)."""

    message_id: str
    kind: MessageKind
    text: str
    state: MessageState
    session_id: str
    turn_id: str | None = None
    origin_id: str | None = None
