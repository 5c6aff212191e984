"""Inbound commands: every action from outside the loop as one small frozen value (SPEC 10).

A message, a control or an answer enters an ``AgentLoop`` in exactly one way:
``loop.submit(command)``. The loop's public methods (``send``, ``inject_steering``,
``interrupt_hard``...) and a ``TurnHandle``'s build a command and submit it; the lanes submit
the turns they start; the Redis worker decodes what other processes send into the same
commands (``from_wire``). Whoever needs to see what comes in (the event recorder, a tracer)
wraps ``submit`` with ``loop.intercept_commands(fn)`` instead of replacing methods.

``COMMANDS`` is the one table of verbs: a new control is a class here and a handler in the
loop's dispatch table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from steerable._core._cancel import CancelMode
from steerable._records import Record, record

__all__ = ["COMMANDS", "AnswerApproval", "AnswerQuestion", "Cancel", "Command", "Edit", "FollowUp", "Interrupt",
           "Resume", "Revoke", "Send", "StartTurn", "Steer", "from_wire"]


@record(kw_only=False)
class Command(Record):
    """Base of every inbound command; ``verb`` names it on the wire and in recordings."""

    verb: ClassVar[str] = ""


@record(kw_only=False)
class Send(Command):
    """A user's or a channel's message for a session (``AgentLoop.send``)."""

    verb: ClassVar[str] = "send"
    text: str
    session_id: str
    policy: str | None = None
    agent: Any = None


@record(kw_only=False)
class StartTurn(Command):
    """Start a turn (``AgentLoop.start_turn``; a lane starting a queued message's turn sets
    ``by_lane`` and names the message)."""

    verb: ClassVar[str] = "start_turn"
    input: str
    session_id: str | None = None
    agent: Any = None
    discard_checkpoint: bool = False
    by_lane: bool = False
    message_id: str | None = None
    """The message (already accepted) this turn takes as its input."""


@record(kw_only=False)
class Resume(Command):
    """Continue a session's pending turn from its checkpoint (``AgentLoop.resume``)."""

    verb: ClassVar[str] = "resume"
    session_id: str
    agent: Any = None
    force: bool = False


@record(kw_only=False)
class Steer(Command):
    """Steering for the session's running turn, or for the turn ``turn_id`` names."""

    verb: ClassVar[str] = "steer"
    text: str
    session_id: str | None = None
    turn_id: str | None = None


@record(kw_only=False)
class FollowUp(Command):
    """A follow-up for the session's running turn, or for the turn ``turn_id`` names."""

    verb: ClassVar[str] = "follow_up"
    text: str
    session_id: str | None = None
    turn_id: str | None = None


@record(kw_only=False)
class Interrupt(Command):
    """A graceful interrupt (with ``hint``), or a hard abort (``hard``)."""

    verb: ClassVar[str] = "interrupt"
    session_id: str | None = None
    turn_id: str | None = None
    hard: bool = False
    hint: str | None = None


@record(kw_only=False)
class Cancel(Command):
    """A cancel with a ``CancelMode``."""

    verb: ClassVar[str] = "cancel"
    session_id: str | None = None
    turn_id: str | None = None
    mode: CancelMode = CancelMode.IMMEDIATE


@record(kw_only=False)
class AnswerApproval(Command):
    """The answer to an ``APPROVAL_REQUESTED``."""

    verb: ClassVar[str] = "approval"
    request_id: str
    approved: bool
    reason: str = ""


@record(kw_only=False)
class AnswerQuestion(Command):
    """The answer to a ``QUESTION_ASKED`` (``AgentLoop.answer``)."""

    verb: ClassVar[str] = "answer"
    request_id: str
    value: Any


@record(kw_only=False)
class Revoke(Command):
    """Withdraw a queued message."""

    verb: ClassVar[str] = "revoke"
    message_id: str


@record(kw_only=False)
class Edit(Command):
    """Change a queued message's text."""

    verb: ClassVar[str] = "edit"
    message_id: str
    text: str


COMMANDS: Mapping[str, type[Command]] = {
    cls.verb: cls for cls in (Send, StartTurn, Resume, Steer, FollowUp, Interrupt, Cancel,
                              AnswerApproval, AnswerQuestion, Revoke, Edit)
}


def from_wire(verb: str, fields: Mapping[str, Any]) -> Command:
    """The command a JSON object names (a Redis control message): ``ValueError`` for an
    unknown verb, ``TypeError`` for fields the command does not have."""
    cls = COMMANDS.get(verb)
    if cls is None or cls in (StartTurn, Resume, Send):  # these carry agents: not on the wire
        raise ValueError(f"unknown command {verb!r}")
    values = dict(fields)
    if cls is Cancel and isinstance(values.get("mode"), str):
        values["mode"] = CancelMode[values["mode"].upper()]
    return cls(**values)
