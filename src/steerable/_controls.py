"""What the commands that act on running turns do (``AnswerApproval``, ``Steer``, ``FollowUp``,
``Interrupt``, ``Cancel``, ``Revoke``, ``Edit``): one function each, in ``CONTROLS``, the
loop's dispatch table for them. They run on the loop's thread (``AgentLoop.submit``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from steerable._commands import (
    AnswerApproval,
    Cancel,
    Command,
    Edit,
    FollowUp,
    Interrupt,
    Revoke,
    Steer,
)
from steerable._core._cancel import CancelHandle
from steerable._core._engine import Engine
from steerable._core._parking import hold_for_parked
from steerable._core._queues import follow_up, steer
from steerable._core._turn_state import TurnState
from steerable._receipts import MessageReceipt

__all__ = ["CONTROLS", "resolve"]


def resolve(engine: Engine, session_id: str | None) -> TurnState | None:
    """The session's running top-level turn; with no session, the one turn running (None when
    none, ``ValueError`` when several)."""
    active = engine.active
    if session_id is not None:
        return active.get(session_id)
    if not active:
        return None
    if len(active) > 1:
        raise ValueError(
            f"{len(active)} turns are active (sessions {sorted(active)}); pass session_id")
    return next(iter(active.values()))


def _target(engine: Engine, session_id: str | None, turn_id: str | None) -> TurnState | None:
    """The turn a control is for: the one ``turn_id`` names (a handle's, sub-turns too), else
    the session's."""
    if turn_id is None:
        return resolve(engine, session_id)
    return engine.turns.get(turn_id)


def _message(engine: Engine, cmd: Steer | FollowUp) -> MessageReceipt:
    st = _target(engine, cmd.session_id, cmd.turn_id)
    steering = isinstance(cmd, Steer)
    if st is None and cmd.turn_id is None:  # a parked turn keeps it until it resumes
        held = hold_for_parked(engine, "steer" if steering else "follow_up", cmd.text,
                               cmd.session_id)
        if held is not None:
            return held
    if st is None:
        r = MessageReceipt("steer" if steering else "follow_up", cmd.text, cmd.session_id or "")
        return engine.inbox.reject(r, "no turn is active")
    return (steer if steering else follow_up)(engine, st, cmd.text)


def _interrupt(engine: Engine, cmd: Interrupt) -> bool:
    st = _target(engine, cmd.session_id, cmd.turn_id)
    if st is None:
        return False
    return engine.interrupt_hard(st) if cmd.hard else engine.interrupt_graceful(st, cmd.hint)


def _cancel(engine: Engine, cmd: Cancel) -> CancelHandle | None:
    st = _target(engine, cmd.session_id, cmd.turn_id)
    return None if st is None else engine.cancel(st, cmd.mode)


def _approval(engine: Engine, cmd: AnswerApproval) -> bool:
    return engine.broker.resolve(cmd.request_id, cmd.approved, cmd.reason)


def _revoke(engine: Engine, cmd: Revoke) -> bool:
    return engine.inbox.revoke(cmd.message_id)


def _edit(engine: Engine, cmd: Edit) -> bool:
    return engine.inbox.edit(cmd.message_id, cmd.text)


CONTROLS: Mapping[type[Command], Callable[[Engine, Any], Any]] = {
    Steer: _message, FollowUp: _message, Interrupt: _interrupt, Cancel: _cancel,
    AnswerApproval: _approval, Revoke: _revoke, Edit: _edit,
}
