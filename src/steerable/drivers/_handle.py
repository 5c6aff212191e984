"""What the loop hands out: ``TurnHandle`` (a running turn), ``TurnInfo``, ``LoopStatistics``.

A ``TurnHandle`` acts on its turn by submitting commands (``steerable.drivers._commands``) to the loop
that made it, like every other inbound action; it reads its turn's state only to answer
questions about it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Generator, Mapping
from typing import Any, Protocol

from steerable._core._cancel import CancelHandle, CancelMode
from steerable._core._turn import TurnResult
from steerable._core._turn_state import TurnState
from steerable._core._watchdog import bare_context
from steerable._events import EventKind, TurnPhase
from steerable._receipts import MessageReceipt, MessageState
from steerable._records import Record, record
from steerable.drivers._commands import Cancel, Command, FollowUp, Interrupt, Steer
from steerable.drivers._lanes import SendAction

__all__ = ["LoopStatistics", "Submits", "TurnHandle", "TurnInfo", "turn_info"]


@record(kw_only=False)
class TurnInfo(Record):
    """A snapshot of a running turn (``AgentLoop.active_turn``)."""

    turn_id: str
    session_id: str
    parent_turn_id: str | None
    phase: TurnPhase
    iteration: int
    started: float
    steering_pending: int
    follow_ups_pending: int
    agent: str = ""
    children: tuple[TurnInfo, ...] = ()
    """The turn's running sub-turns, each with its own children: the turn tree."""


def turn_info(st: TurnState) -> TurnInfo:
    return TurnInfo(st.turn_id, st.session_id, st.parent_turn_id, st.control.phase,
                    st.transcript.iteration, st.started, len(st.inbound.steering),
                    len(st.inbound.follow_ups), st.agent.name,
                    tuple(turn_info(c) for c in list(st.tree.children.values())))


@record(kw_only=False)
class LoopStatistics(Record):
    """Counters of an AgentLoop (``AgentLoop.statistics``)."""

    events_emitted: int
    dropped: Mapping[EventKind, int]
    """Events lost to full subscriber buffers, per kind, across all subscriptions."""
    subscribers: int
    active_turns: int
    turns_started: int
    turns_finished: int


class Submits(Protocol):
    """What a handle needs of its loop: the one way in."""

    def submit(self, command: Command) -> Any: ...


def _wake(waiter: asyncio.Future[None], _task: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


class TurnHandle:
    """A running turn. Await it for the ``TurnResult``; awaiting never cancels the turn."""

    def __init__(self, loop: Submits, state: TurnState, task: asyncio.Task[TurnResult],
                 direct: bool = False) -> None:
        self._loop = loop
        self._state = state
        self._task = task
        self._direct = direct
        """The task runs ``run_turn`` itself (a driver's turn): its result is the task's."""

    @property
    def turn_id(self) -> str:
        return self._state.turn_id

    @property
    def session_id(self) -> str:
        return self._state.session_id

    def done(self) -> bool:
        return self._task.done()

    def result(self) -> TurnResult:
        """The result of a finished turn; raises ``asyncio.InvalidStateError`` before that."""
        return self._task.result()

    @property
    def message_id(self) -> str | None:
        """The id of the message the turn was started with (None for a resumed turn that had
        delivered it before its checkpoint)."""
        r = self._state.inbound.input_receipt
        return None if r is None else r.message_id

    @property
    def state(self) -> MessageState:
        """The state of that message: ``queued`` until the turn's first LLM request carries it."""
        r = self._state.inbound.input_receipt
        return MessageState.DELIVERED if r is None else r.state

    def inject_steering(self, text: str) -> MessageReceipt:
        answer: MessageReceipt = self._loop.submit(Steer(text, self.session_id, self.turn_id))
        return answer

    def inject_follow_up(self, text: str) -> MessageReceipt:
        answer: MessageReceipt = self._loop.submit(
            FollowUp(text, self.session_id, self.turn_id))
        return answer

    def interrupt_graceful(self, hint: str | None = None) -> bool:
        return bool(self._loop.submit(Interrupt(self.session_id, self.turn_id, hint=hint)))

    def interrupt_hard(self) -> bool:
        return bool(self._loop.submit(Interrupt(self.session_id, self.turn_id, hard=True)))

    @property
    def action(self) -> SendAction:
        """What ``AgentLoop.send`` did with the message: a handle means a turn was started."""
        return "started"

    def cancel(self, mode: CancelMode = CancelMode.IMMEDIATE) -> CancelHandle:
        """Cancel this turn (see ``AgentLoop.cancel``); after it ended, a handle that did not
        contribute."""
        handle: CancelHandle | None = self._loop.submit(
            Cancel(self.session_id, self.turn_id, mode))
        if handle is None:  # the turn has ended: nothing to change
            state = self._state.control.cancel
            if state is None:  # never asked to cancel: nothing to settle either
                return CancelHandle(mode, self.turn_id, False, None)
            return state.request(mode, self.turn_id, False)
        return handle

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return self._awaited().__await__()

    def _awaited(self) -> Awaitable[TurnResult]:
        """What awaiting the handle awaits (``AgentLoop.run_turn`` awaits it without holding
        the handle: one object fewer for the collector per awaited turn)."""
        # What asyncio.shield does, with one future and no callback: cancelling the awaiting
        # task cancels ``waiter`` only, never the turn. ``waiter`` gets the result itself,
        # so awaiting it is all the caller's await is: no generator of ours around it (one
        # object fewer for the collector per awaited turn).
        task = self._task
        if task.done() or not self._direct:
            return self._wait_task()
        # Woken by the turn's last step (``run_turn``'s finally), in the pass the turn ends:
        # a done callback on its task would run one loop pass later, and wake us one after
        # that. (A turn's task always reaches that step: the engine never cancels it before
        # it has started, ``Engine.interrupt_hard``.)
        waiter: asyncio.Future[TurnResult] = task.get_loop().create_future()
        ctl = self._state.control
        if ctl.waiter is None:
            ctl.waiter = waiter
        else:
            ctl.waiters += (waiter,)
        return waiter

    async def _wait_task(self) -> TurnResult:
        """A finished turn, or a task with steps after its ``run_turn`` (a sub-turn's)."""
        task = self._task
        if not task.done():
            waiter = task.get_loop().create_future()
            # (``_wake`` reads no context variable: no copy of the caller's context, one object
            # fewer for the collector per awaited turn)
            task.add_done_callback(functools.partial(_wake, waiter), context=bare_context())
            await waiter
        return task.result()

    def __repr__(self) -> str:
        return f"<TurnHandle {self.turn_id} session={self.session_id} done={self.done()}>"
