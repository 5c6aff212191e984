"""Inbound commands: every action from outside the loop as one small frozen value (SPEC 10).

A message, a control or an answer enters an ``AgentLoop`` in exactly one way:
``loop.submit(command)``. The loop's public methods (``send``, ``inject_steering``,
``interrupt_hard``...) and a ``TurnHandle``'s build a command and submit it; the lanes submit
the turns they start; the Redis worker decodes what other processes send into the same
commands. Whoever needs to see what comes in (the event recorder, a tracer) wraps ``submit``
with ``loop.intercept_commands(fn)`` instead of replacing methods.

This module holds the values and their wire form (``fields`` / ``from_fields``); the one table
of verbs, with what runs each, is ``_controls.VERBS`` (its docstring says what a new verb
needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from steerable._core._agent import Agent
from steerable._core._cancel import CancelMode
from steerable._parts import Part, as_content
from steerable._records import Record, record
from steerable.drivers._checks import (
    check_agent,
    check_mode,
    check_session_id,
    check_str,
    check_text,
    check_type,
)
from steerable.drivers._lanes import check_policy

__all__ = ["AnswerApproval", "AnswerQuestion", "Cancel", "Command", "Edit", "FollowUp", "Interrupt", "Resume",
           "Revoke", "Send", "StartTurn", "Steer"]


@record(kw_only=False)
class Command(Record):
    """Base of every inbound command; ``verb`` names it on the wire and in recordings.
    ``remote``: other processes may send it (a Redis control message, a recording's control):
    its fields are plain JSON values then, never an agent."""

    verb: ClassVar[str] = ""
    remote: ClassVar[bool] = True

    def check(self) -> None:
        """Raise ``TypeError``/``ValueError`` for a field a caller got wrong, before the command
        changes anything (``AgentLoop.submit`` checks every command it is given)."""

    def fields(self) -> dict[str, Any]:
        """The command as plain JSON values (its wire form, ``from_fields`` reads it back)."""
        return {name: getattr(self, name) for name in self._names}

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Self:
        """The command of a wire form; ``TypeError`` for a field it does not have."""
        return cls(**fields)


@record(kw_only=False)
class Send(Command):
    """A user's or a channel's message for a session (``AgentLoop.send``)."""

    verb: ClassVar[str] = "send"
    remote: ClassVar[bool] = False  # carries an agent
    text: str
    session_id: str
    policy: str | None = None
    agent: Any = None
    parts: tuple[Part, ...] = ()
    """Its content parts when it has images or files (``text`` is their text view)."""

    def check(self) -> None:
        check_text("message text", self.text)
        as_content(self.parts)
        check_session_id(self.session_id)  # here too: a queued message starts a turn later
        if self.policy is not None:
            check_policy(self.policy)
        check_agent(self.agent, Agent)


@record(kw_only=False)
class StartTurn(Command):
    """Start a turn (``AgentLoop.start_turn``; a lane starting a queued message's turn sets
    ``by_lane`` and names the message)."""

    verb: ClassVar[str] = "start_turn"
    remote: ClassVar[bool] = False  # carries an agent
    input: str
    session_id: str | None = None
    agent: Any = None
    discard_checkpoint: bool = False
    by_lane: bool = False
    message_id: str | None = None
    """The message (already accepted) this turn takes as its input."""
    parts: tuple[Part, ...] = ()
    """The input's content parts when it has images or files (``input`` is their text)."""
    origin_id: str | None = None
    """The message the input re-runs (a follow-up an earlier turn handed back, SPEC 10)."""

    def check(self) -> None:
        check_text("turn input", self.input)
        as_content(self.parts)
        if self.session_id is not None:
            check_session_id(self.session_id)
        check_agent(self.agent)


@record(kw_only=False)
class Resume(Command):
    """Continue a session's pending turn from its checkpoint (``AgentLoop.resume``)."""

    verb: ClassVar[str] = "resume"
    remote: ClassVar[bool] = False  # carries an agent
    session_id: str
    agent: Any = None
    force: bool = False

    def check(self) -> None:
        check_agent(self.agent)
        check_str("session_id", self.session_id)


@record(kw_only=False)
class Steer(Command):
    """Steering for the session's running turn, or for the turn ``turn_id`` names."""

    verb: ClassVar[str] = "steer"
    text: str
    session_id: str | None = None
    turn_id: str | None = None
    message_id: str | None = None
    """The id of a message accepted already (a Redis worker's queued entry), kept by the turn
    that takes it. When the turn cannot take it nothing is settled: the receipt comes back
    falsy but still ``queued``, and the caller queues the message for a turn of its own."""

    def check(self) -> None:
        check_text("steering text", self.text)


@record(kw_only=False)
class FollowUp(Command):
    """A follow-up for the session's running turn, or for the turn ``turn_id`` names."""

    verb: ClassVar[str] = "follow_up"
    text: str
    session_id: str | None = None
    turn_id: str | None = None

    def check(self) -> None:
        check_text("follow-up text", self.text)


@record(kw_only=False)
class Interrupt(Command):
    """A graceful interrupt (with ``hint``), or a hard abort (``hard``)."""

    verb: ClassVar[str] = "interrupt"
    session_id: str | None = None
    turn_id: str | None = None
    hard: bool = False
    hint: str | None = None

    def check(self) -> None:
        check_str("hint", self.hint, optional=True)


@record(kw_only=False)
class Cancel(Command):
    """A cancel with a ``CancelMode``."""

    verb: ClassVar[str] = "cancel"
    session_id: str | None = None
    turn_id: str | None = None
    mode: CancelMode = CancelMode.IMMEDIATE

    def check(self) -> None:
        check_mode(self.mode)

    def fields(self) -> dict[str, Any]:
        return {**Command.fields(self), "mode": self.mode.name}

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Self:
        mode = fields.get("mode", CancelMode.IMMEDIATE)
        if isinstance(mode, str):
            if mode.upper() not in CancelMode.__members__:
                raise ValueError(f"unknown cancel mode {mode!r}")
            mode = CancelMode[mode.upper()]
        return cls(**{**fields, "mode": mode})


@record(kw_only=False)
class AnswerApproval(Command):
    """The answer to an ``APPROVAL_REQUESTED``."""

    verb: ClassVar[str] = "approval"
    request_id: str
    approved: bool
    reason: str = ""

    def check(self) -> None:
        check_str("request_id", self.request_id)
        check_type("approved", self.approved, bool)
        check_str("reason", self.reason)


@record(kw_only=False)
class AnswerQuestion(Command):
    """The answer to a ``QUESTION_ASKED`` (``AgentLoop.answer``): checked against the
    question's choices or schema where it is answered."""

    verb: ClassVar[str] = "answer"
    request_id: str
    value: Any

    def check(self) -> None:
        check_str("request_id", self.request_id)


@record(kw_only=False)
class Revoke(Command):
    """Withdraw a queued message."""

    verb: ClassVar[str] = "revoke"
    message_id: str

    def check(self) -> None:
        check_str("message_id", self.message_id)


@record(kw_only=False)
class Edit(Command):
    """Change a queued message's text."""

    verb: ClassVar[str] = "edit"
    message_id: str
    text: str

    def check(self) -> None:
        check_str("message_id", self.message_id)
        check_text("message text", self.text)
