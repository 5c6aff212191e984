"""``SessionDriver``: one conversation as a front end drives it.

The CLI's ``run`` and ``chat`` and the server's web page need the same policy, so it lives
here once: messages go through ``AgentLoop.send`` (which runs follow-ups in order); the first
interrupt request (Ctrl+C, a Stop button) is graceful and a second one on the same turn, or
within ``double_press`` seconds, aborts at once and withdraws the messages queued behind it;
open approval requests are tracked from the events and answered here (an interrupt denies
them, so a turn waiting for a person can stop); a pending turn (cancelled, or cut off when its
process stopped) is resumed or discarded here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from steerable._core._agent import Agent
from steerable._core._bus import Subscription
from steerable._core._checkpoint import Checkpoint, CheckpointStore
from steerable._core._turn import TurnResult
from steerable._events import ApprovalRequested, Event, EventKind, TurnStatus
from steerable.drivers._handle import TurnHandle
from steerable.drivers._lanes import BusyPolicy, QueuedTurn
from steerable.drivers._loop import AgentLoop
from steerable.errors import SessionBusyError

__all__ = ["InterruptPress", "SessionDriver"]

DOUBLE_PRESS = 2.0


@dataclass(frozen=True, slots=True)
class InterruptPress:
    """What one interrupt request did.

    ``action``: ``graceful`` (the turn will sum up and stop), ``armed`` (nothing could be
    stopped gently right now; another press aborts), ``hard`` (aborted, queued messages
    withdrawn: ``dropped``), ``idle`` (nothing was running).
    """

    action: Literal["graceful", "armed", "hard", "idle"]
    dropped: tuple[str, ...] = ()


class SessionDriver:
    """Drive one session of ``loop`` for a person: send, interrupt, approve, wait."""

    def __init__(self, loop: AgentLoop, session_id: str, *, double_press: float = DOUBLE_PRESS,
                 clock: Callable[[], float] = time.monotonic,
                 on_result: Callable[[TurnResult], None] | None = None) -> None:
        self.loop = loop
        self.session_id = session_id
        self.agent: Agent | None = None
        """The agent for the next turns (None: the loop's); e.g. a dry-run twin."""
        self.on_result = on_result
        """Called with the result of every turn a message sent here ran in."""
        self._double_press = double_press
        self._clock = clock
        self._last_press = float("-inf")
        self._pressed_turn: str | None = None
        self._approvals: dict[str, ApprovalRequested] = {}
        self._waiters: set[asyncio.Task[None]] = set()
        self._sub: Subscription | None = None

    # -- messages -----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.loop.busy(self.session_id)

    def send(self, text: str, policy: BusyPolicy | None = None) -> TurnHandle | QueuedTurn:
        """Send ``text`` to the session (see ``AgentLoop.send``)."""
        sent = self.loop.send(text, self.session_id, policy, agent=self.agent)
        if self.on_result is not None:
            self._watch(self._report(sent))
        return sent

    def _watch(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job)
        self._waiters.add(task)  # awaited by wait_idle
        task.add_done_callback(self._waiters.discard)

    async def _report(self, sent: TurnHandle | QueuedTurn) -> None:
        try:
            result = await sent
        except (RuntimeError, ValueError):
            # Withdrawn (the press that withdrew it said so), the loop closed, or a pending
            # checkpoint refused its turn (the next send says so).
            return
        if self.on_result is not None:
            self.on_result(result)

    async def wait_idle(self) -> TurnResult | None:
        """Wait until nothing runs or waits in the session; the last turn's result."""
        result = await self.loop.wait_session(self.session_id)
        if self._waiters:
            await asyncio.wait(list(self._waiters))
        return result

    # -- the pending turn ---------------------------------------------------------------------

    def pending(self) -> Checkpoint | None:
        """The session's pending turn: a cancelled turn, or one whose process stopped (see
        ``AgentLoop.checkpoint``); None when it has none."""
        return self.loop.checkpoint(self.session_id)

    def resume(self) -> TurnHandle | None:
        """Continue the pending turn (``AgentLoop.resume``); None when there is none. It runs
        outside ``send``, so the follow-ups it hands back are sent here when it ends (after
        the messages sent while it ran)."""
        handle = self.loop.resume(self.session_id, agent=self.agent)
        if handle is not None:
            self._watch(self._after_resume(handle))
        return handle

    async def _after_resume(self, handle: TurnHandle) -> None:
        result = await handle
        if result.status in (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS):
            for text in result.follow_ups:
                self.send(text, "follow_up")
        if self.on_result is not None:
            self.on_result(result)

    def discard(self) -> bool:
        """Drop the pending turn (an unreadable one too); False when there was none. Refused
        with ``SessionBusyError`` while the session is busy: a running turn's checkpoint is
        its own."""
        if self.loop.busy(self.session_id):
            raise SessionBusyError(f"session {self.session_id!r} is busy; its pending turn, if "
                                   "any, is the running one")
        store = self.loop.store
        if not isinstance(store, CheckpointStore):
            return False
        return store.delete_checkpoint(self.session_id)

    # -- interrupts ---------------------------------------------------------------------------

    def press_interrupt(self) -> InterruptPress:
        """Ctrl+C: graceful first; a second press on the same turn, or within
        ``double_press`` seconds, aborts at once and withdraws the queued messages."""
        self.deny_open("interrupted by the user")
        sid = self.session_id
        if not self.loop.busy(sid):
            return InterruptPress("idle")
        now = self._clock()
        info = self.loop.active_turn(sid)
        turn_id = info.turn_id if info is not None else None
        again = now - self._last_press <= self._double_press or (
            turn_id is not None and turn_id == self._pressed_turn)
        self._last_press = now
        if again:
            self._last_press = float("-inf")
            self.loop.interrupt_hard(sid)
            return InterruptPress("hard", tuple(self.loop.drop_queued(sid)))
        self._pressed_turn = turn_id
        if self.loop.interrupt_graceful(sid):
            return InterruptPress("graceful")
        return InterruptPress("armed")

    def stop(self) -> InterruptPress:
        """Abort at once and withdraw the queued messages (a Stop button)."""
        self.deny_open("stopped by the user")
        dropped = tuple(self.loop.drop_queued(self.session_id))
        aborted = self.loop.interrupt_hard(self.session_id)
        return InterruptPress("hard" if aborted or dropped else "idle", dropped)

    # -- approvals ----------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Track approval requests from the loop's events (``events()`` calls this)."""
        if event.kind is EventKind.APPROVAL_REQUESTED:
            self._approvals[event.request_id] = event
        elif event.kind is EventKind.APPROVAL_RESOLVED:
            self._approvals.pop(event.request_id, None)
        elif event.kind is EventKind.TURN_END and self._approvals:
            for rid, asked in list(self._approvals.items()):
                if asked.turn_id == event.turn_id:
                    del self._approvals[rid]

    @property
    def open_approvals(self) -> list[ApprovalRequested]:
        """Requests still waiting for an answer, oldest first."""
        return list(self._approvals.values())

    def answer(self, approved: bool, *, request_id: str | None = None, reason: str = "",
               allow: Iterable[str] = ()) -> bool:
        """Answer a request (the oldest open one unless ``request_id``); ``allow`` adds
        permission rules (``always``) first, for the request's session only. False when no
        such request is open."""
        rid = request_id if request_id is not None else next(iter(self._approvals), None)
        if rid is None:
            return False
        asked = self._approvals.get(rid)
        session = asked.session_id if asked is not None else self.session_id
        for pattern in allow:
            self.loop.permissions.add("allow", pattern, session_id=session)
        self._approvals.pop(rid, None)
        return self.loop.resolve_approval(rid, approved, reason)

    def deny_open(self, reason: str) -> None:
        for rid in list(self._approvals):
            if self._approvals[rid].session_id == self.session_id:
                self.answer(False, request_id=rid, reason=reason)

    # -- events -------------------------------------------------------------------------------

    def events(self, buffer: int = 65536) -> AsyncIterator[Event]:
        """Every event of the loop from now on (subscribed at once, before anything is sent),
        approvals tracked on the way; the iteration ends after ``close()``."""
        self._sub = sub = self.loop.subscribe(buffer=buffer)
        return self._read(sub)

    async def _read(self, sub: Subscription) -> AsyncIterator[Event]:
        async for event in sub:
            self.observe(event)
            yield event

    def close(self) -> None:
        """End ``events()`` after the events already buffered."""
        if self._sub is not None:
            self._sub.close()
