"""The one table of inbound verbs: each command (``_commands``) and what runs it.

``AgentLoop.submit`` runs a command by its row in ``VERBS``, on the loop's thread, with the
loop's parts (``LoopParts``): the engine, the turns, the lanes and the default busy policy.

What a new control verb needs, and all it needs:

1. a frozen class in ``_commands.py`` with its fields and ``verb`` (``remote = False`` if it
   carries something that cannot cross a process, like an agent);
2. its row in ``VERBS`` below: the function that runs it.

Nothing else has a branch per verb: the Redis worker decodes what other processes send with
``from_wire`` (any ``remote`` verb of this table), the event recorder writes every remote
command it sees as its verb and fields and the replay player submits it again through
``from_wire``. A method on ``AgentLoop`` or ``TurnHandle`` that builds the command is a
convenience for callers (``loop.submit(NewVerb(...))`` works without one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from steerable._core._cancel import CancelHandle
from steerable._core._engine import Engine
from steerable._core._parking import hold_for_parked
from steerable._core._queues import follow_up, steer
from steerable._core._turn_state import TurnState
from steerable._receipts import MessageReceipt
from steerable._records import state
from steerable.drivers._binding import LoopBinding
from steerable.drivers._commands import (
    AnswerApproval,
    AnswerQuestion,
    Cancel,
    Command,
    Edit,
    FollowUp,
    Interrupt,
    Resume,
    Revoke,
    Send,
    StartTurn,
    Steer,
)
from steerable.drivers._lanes import BusyPolicy, Lanes, check_policy
from steerable.drivers._turns import Turns, resolve

__all__ = ["COMMANDS", "VERBS", "Dispatcher", "Interceptor", "LoopParts", "abort", "from_wire", "resolve"]


@state(eq=False)
class LoopParts:
    """What the verbs act on: one loop's engine, its binding, turns and lanes."""

    engine: Engine
    binding: LoopBinding
    turns: Turns
    lanes: Lanes
    busy_policy: BusyPolicy


def _target(engine: Engine, session_id: str | None, turn_id: str | None) -> TurnState | None:
    """The turn a control is for: the one ``turn_id`` names (a handle's, sub-turns too), else
    the session's."""
    if turn_id is None:
        return resolve(engine, session_id)
    return engine.turns.get(turn_id)


def _send(parts: LoopParts, cmd: Send) -> Any:
    parts.binding.bind_if_running("send")  # its answer is awaited on that loop
    policy = parts.busy_policy if cmd.policy is None else check_policy(cmd.policy)
    return parts.lanes.send(cmd.text, cmd.session_id, policy, cmd.agent, cmd.parts)


def _message(parts: LoopParts, cmd: Steer | FollowUp) -> MessageReceipt:
    engine = parts.engine
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
    if isinstance(cmd, Steer):
        return steer(engine, st, cmd.text, cmd.message_id)
    return follow_up(engine, st, cmd.text)


def _interrupt(parts: LoopParts, cmd: Interrupt) -> bool:
    if cmd.hard:
        return abort(parts.engine, cmd.session_id, cmd.turn_id)
    st = _target(parts.engine, cmd.session_id, cmd.turn_id)
    return st is not None and parts.engine.interrupt_graceful(st, cmd.hint)


def abort(engine: Engine, session_id: str | None, turn_id: str | None) -> bool:
    """What an ``Interrupt(hard=True)`` runs; ``AgentLoop.interrupt_hard`` calls it directly
    when no interceptor watches the commands (``Dispatcher.abort``)."""
    st = _target(engine, session_id, turn_id)
    return st is not None and engine.abort(st)


def _cancel(parts: LoopParts, cmd: Cancel) -> CancelHandle | None:
    st = _target(parts.engine, cmd.session_id, cmd.turn_id)
    return None if st is None else parts.engine.cancel(st, cmd.mode)


Handler = Callable[[LoopParts, Any], Any]

VERBS: Mapping[type[Command], Handler] = {
    StartTurn: lambda parts, cmd: parts.turns.start(cmd),
    Resume: lambda parts, cmd: parts.turns.resume(cmd),
    Send: _send,
    Steer: _message,
    FollowUp: _message,
    Interrupt: _interrupt,
    Cancel: _cancel,
    AnswerApproval: lambda parts, cmd: parts.turns.answers.approval(cmd),
    AnswerQuestion: lambda parts, cmd: parts.turns.answers.question(cmd),
    Revoke: lambda parts, cmd: parts.engine.inbox.revoke(cmd.message_id),
    Edit: lambda parts, cmd: parts.engine.inbox.edit(cmd.message_id, cmd.text),
}
"""Every verb the loop takes, and what runs it."""

COMMANDS: Mapping[str, type[Command]] = {cls.verb: cls for cls in VERBS}
"""The verbs by name (the wire and recordings name commands so)."""


def from_wire(verb: str, fields: Mapping[str, Any]) -> Command:
    """The command a JSON object names (a Redis control message, a recorded control):
    ``ValueError`` for an unknown verb or one that cannot cross a process, ``TypeError`` for
    fields the command does not have."""
    cls = COMMANDS.get(verb)
    if cls is None or not cls.remote:
        raise ValueError(f"unknown command {verb!r}")
    return cls.from_fields(fields)


Interceptor = Callable[..., Any]
"""``interceptor(command, *, proceed) -> answer`` (see ``AgentLoop.intercept_commands``)."""


class Dispatcher:
    """Runs commands by ``VERBS``, past the interceptors (on the loop's thread)."""

    def __init__(self, parts: LoopParts) -> None:
        self.parts = parts
        self.interceptors: list[Interceptor] = []

    def run(self, command: Command) -> Any:
        proceed: Callable[[Command], Any] = self._dispatch
        for interceptor in reversed(self.interceptors):
            proceed = functools.partial(interceptor, proceed=proceed)
        return proceed(command)

    def _dispatch(self, command: Command) -> Any:
        handler = VERBS.get(type(command))
        if handler is None:
            raise TypeError(f"not a command: {command!r}")
        return handler(self.parts, command)

    def abort(self, session_id: str | None, turn_id: str | None) -> bool:
        """A hard abort. With no interceptor it skips building and dispatching the command:
        an abort mostly comes after the loop sat idle, when every step runs on cold caches
        (~5x slower), and the tool's cancel waits for all of it. What runs is the same as
        ``run(Interrupt(session_id, turn_id, hard=True))``; with interceptors it is that."""
        if self.interceptors:  # they see every command, this one too
            return bool(self.run(Interrupt(session_id, turn_id, hard=True)))
        engine = self.parts.engine
        if turn_id is None and session_id is not None:  # (``_target``'s answer, in one step)
            st = engine.active.get(session_id)
            return st is not None and engine.abort(st)
        return abort(engine, session_id, turn_id)

    def intercept(self, interceptor: Interceptor) -> Callable[[], None]:
        self.interceptors.append(interceptor)

        def remove() -> None:
            if interceptor in self.interceptors:
                self.interceptors.remove(interceptor)

        return remove
