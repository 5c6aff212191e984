"""Busy-session policies: what ``AgentLoop.send`` does with a message for a session at work.

Each session that ``send`` has touched gets a *lane*: a queue of messages waiting for their own
turn and one runner task that starts them, one turn at a time, each only after the turn before
has ended and been saved. A message for an idle session starts a turn at once (the runner then
owns it, so the follow-ups that turn hands back run next). For a busy session the policy says
what happens: ``steer`` injects it into the running turn, ``follow_up`` queues it,
``interrupt``/``rollback`` stop the running turn (gracefully / hard) and put it first in the
queue, ``reject`` raises ``SessionBusyError``. A message that cannot be delivered as asked (the
turn is already finishing, its steering queue is full) is queued rather than lost.

Lanes never touch the engine: they are handed a ``LaneEngine``, the few things they need of
it and of the loop (``_lane_view.EngineView`` is the real one), so this module imports neither
the engine nor ``_loop``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Generator
from dataclasses import field
from typing import Any, Literal, Protocol, get_args

from steerable._core._agent import Agent
from steerable._core._turn import TurnResult
from steerable._core._turn_state import TurnState
from steerable._events import TurnStatus
from steerable._parts import Part
from steerable._receipts import MessageReceipt, MessageState
from steerable._records import state
from steerable.errors import SessionBusyError

RECENT_RESULTS = 1024

__all__ = ["BUSY_POLICIES", "BusyPolicy", "LaneEngine", "Lanes", "QueuedTurn", "SendAction",
           "check_policy"]

BusyPolicy = Literal["steer", "follow_up", "interrupt", "rollback", "reject"]
SendAction = Literal["started", "steered", "queued", "interrupted", "rolled_back"]
BUSY_POLICIES: frozenset[str] = frozenset(get_args(BusyPolicy))


def check_policy(policy: object) -> BusyPolicy:
    if policy not in BUSY_POLICIES:
        raise ValueError(f"unknown busy policy {policy!r}; use one of {sorted(BUSY_POLICIES)}")
    return policy  # type: ignore[return-value]


class _Handle(Protocol):
    """What lanes need of a ``TurnHandle``."""

    @property
    def turn_id(self) -> str: ...

    def __await__(self) -> Generator[Any, None, TurnResult]: ...


class LaneEngine(Protocol):
    """What lanes need of the engine and the loop, and nothing more."""

    def running(self, session_id: str) -> TurnState | None:
        """The session's running top-level turn."""
        ...

    def start(self, text: str, session_id: str, agent: Agent | None,
              message_id: str | None, parts: tuple[Part, ...] = ()) -> _Handle:
        """Start a turn of the message (``SessionBusyError`` when one runs already); ``parts``
        its content parts, for a new message that has any."""
        ...

    def has_slot(self) -> bool:
        """``Limits.active_turns`` lets one more turn start (sub-turns count too)."""
        ...

    async def wait_slot(self) -> None:
        """Until a running turn ends (a slot may be free then)."""
        ...

    def steer(self, st: TurnState, r: MessageReceipt) -> bool:
        """Put ``r`` in the turn's steering; False (``r`` untouched) when it cannot take it."""
        ...

    def interrupt(self, st: TurnState, *, hard: bool) -> None: ...

    def follow_up_queued(self, st: TurnState, text: str) -> None:
        """Tell the turn's watchers a message waits behind it (``FOLLOW_UP_QUEUED``)."""
        ...

    def hold(self, session_id: str, receipts: list[MessageReceipt], *, sync: bool,
             agent: Agent | None = None) -> None:
        """What the lane holds, in the engine's view (and with ``sync`` in the store's, before
        the change is acknowledged); ``agent``: the one the first message names, if any."""
        ...

    def accept(self, r: MessageReceipt, detail: str) -> None:
        """``r`` is queued (``MESSAGE_STATE`` queued)."""
        ...

    def settle(self, r: MessageReceipt, state: MessageState, detail: str) -> None:
        """``r`` reaches a terminal state."""
        ...

    def reject(self, r: MessageReceipt, reason: str) -> None:
        """``r`` is refused (its receipt falsy)."""
        ...


class QueuedTurn:
    """A message ``send`` did not start a turn for (the session was busy).

    ``action`` says what was done with it. Awaiting it gives the ``TurnResult`` of the turn that
    took the message: the running turn for ``steered``, else the turn it gets of its own once
    those before it have ended. ``turn_id`` is known once that turn has started.
    """

    def __init__(self, receipt: MessageReceipt, action: SendAction, agent: Agent | None,
                 *, urgent: bool = False) -> None:
        self.receipt = receipt
        self.session_id = receipt.session_id
        self.action: SendAction = action
        self.agent = agent
        self.urgent = urgent
        self.handle: Any = None
        """The ``TurnHandle`` of the turn that took the message, once it has started."""
        self._turn_id: str | None = None
        self._future: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()

    @property
    def turn_id(self) -> str | None:
        return self._turn_id

    @property
    def text(self) -> str:
        return self.receipt.text

    @property
    def message_id(self) -> str:
        return self.receipt.message_id

    @property
    def state(self) -> MessageState:
        return self.receipt.state

    def done(self) -> bool:
        return self._future.done()

    def _started(self, handle: _Handle) -> None:
        self.handle = handle
        self._turn_id = handle.turn_id

    def _finish(self, result: TurnResult) -> None:
        if not self._future.done():
            self._future.set_result(result)

    def _fail(self, exc: BaseException) -> None:
        if not self._future.done():
            self._future.set_exception(exc)
            self._future.exception()  # retrieved: nobody has to await a dropped message

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return asyncio.shield(self._future).__await__()

    def __repr__(self) -> str:
        return f"<QueuedTurn {self.action} session={self.session_id} turn={self._turn_id}>"


@state(eq=False)
class _Lane:
    """One session's queue of messages waiting for turns of their own, and its runner."""

    owner: Lanes
    session_id: str
    pending: deque[QueuedTurn] = field(default_factory=deque)
    runner: asyncio.Task[None] | None = None
    current: QueuedTurn | None = None
    """The queued message whose turn runs now."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    # -- MessageHolder: revoke and edit reach the messages waiting here --

    def withdraw(self, receipt: MessageReceipt) -> bool:
        for item in self.pending:
            if item.receipt is receipt:
                self.pending.remove(item)
                item._fail(RuntimeError("the message was revoked before its turn started"))
                self.owner._mirror(self.session_id, self)
                return True
        return False

    def edited(self) -> None:
        self.owner._mirror(self.session_id, self)


class Lanes:
    """Every session's lane. Runs on the loop's thread only (``AgentLoop`` marshals calls)."""

    def __init__(self, engine: LaneEngine) -> None:
        self._engine = engine
        self._lanes: dict[str, _Lane] = {}
        self._recent: OrderedDict[str, TurnResult] = OrderedDict()
        """The last result per session, for ``wait_session``; bounded, oldest forgotten."""
        self._closed = False

    # -- questions ----------------------------------------------------------------------------

    def busy(self, session_id: str) -> bool:
        """A turn runs, or messages wait for one."""
        lane = self._lanes.get(session_id)
        return self._engine.running(session_id) is not None or (lane is not None and (
            lane.runner is not None or bool(lane.pending)))

    def queued(self, session_id: str) -> list[str]:
        lane = self._lanes.get(session_id)
        return [] if lane is None else [q.text for q in lane.pending]

    def runners(self) -> list[asyncio.Task[None]]:
        return [lane.runner for lane in self._lanes.values() if lane.runner is not None]

    # -- send ---------------------------------------------------------------------------------

    def send(self, text: str, session_id: str, policy: BusyPolicy,
             agent: Agent | None, parts: tuple[Part, ...] = ()) -> Any:
        if self._closed:
            raise RuntimeError("this AgentLoop is closed")
        lane = self._lanes.get(session_id)
        if lane is None:
            lane = self._lanes[session_id] = _Lane(self, session_id)
        engine = self._engine
        st = engine.running(session_id)
        if st is None and lane.runner is None and not lane.pending and engine.has_slot():
            handle = engine.start(text, session_id, agent, None, parts)
            self._run(session_id, lane, handle)
            return handle
        if parts:
            # Steering and queues keep text (their checkpoints too): an image would be lost.
            raise SessionBusyError(
                f"session {session_id!r} is busy; a message with images or files starts a turn "
                "of its own: send it again once the session is idle (it was not queued)")
        r = MessageReceipt("send", text, session_id)
        if policy == "reject" and (st is not None or lane.runner is not None or lane.pending):
            what = f"turn {st.turn_id} is running" if st is not None else "messages are queued"
            engine.reject(r, f"the session is busy ({what}); policy 'reject'")
            raise SessionBusyError(f"session {session_id!r} is busy ({what}); the message was "
                                   "not queued (policy 'reject')")
        if policy == "steer" and st is not None and engine.steer(st, r):
            return self._steered(r, st, agent)
        urgent = policy in ("interrupt", "rollback")
        action: SendAction = "queued"
        if urgent and st is not None:
            engine.interrupt(st, hard=policy == "rollback")
            action = "interrupted" if policy == "interrupt" else "rolled_back"
        item = QueuedTurn(r, action, agent, urgent=urgent)
        self._queue(session_id, lane, item, urgent=urgent, front=False)
        self._mirror(session_id, lane)  # durable before acknowledged
        if not urgent and st is not None and not st.control.finishing:
            engine.follow_up_queued(st, text)
        engine.accept(r, "waiting for a turn of its own")
        if lane.runner is None:
            self._run(session_id, lane, None)
        return item

    @staticmethod
    def _steered(r: MessageReceipt, st: TurnState, agent: Agent | None) -> QueuedTurn:
        item = QueuedTurn(r, "steered", agent)
        item._turn_id = st.turn_id
        assert st.control.task is not None
        st.control.task.add_done_callback(
            lambda t: item._finish(t.result()) if not t.cancelled() and t.exception() is None
            else item._fail(RuntimeError("the steered turn did not finish")))
        return item

    def _mirror(self, session_id: str, lane: _Lane, *, sync: bool = True) -> None:
        """The engine's view of what the lane holds, and with ``sync`` the store's: written
        before the change is acknowledged."""
        self._engine.hold(session_id, [item.receipt for item in lane.pending], sync=sync,
                          agent=lane.pending[0].agent if lane.pending else None)

    @staticmethod
    def _queue(session_id: str, lane: _Lane, item: QueuedTurn, *, urgent: bool,
               front: bool) -> None:
        """Messages that interrupted a turn run first, in order; then the rest, in order."""
        item.receipt._holder = lane
        if urgent or front:
            lane.pending.insert(sum(1 for q in lane.pending if q.urgent), item)
        else:
            lane.pending.append(item)

    # -- the runner ---------------------------------------------------------------------------

    def _run(self, session_id: str, lane: _Lane, first: _Handle | None) -> None:
        lane.idle.clear()
        lane.runner = asyncio.get_running_loop().create_task(
            self._drain(session_id, lane, first), name=f"steerable-lane-{session_id}")

    async def _drain(self, session_id: str, lane: _Lane, handle: _Handle | None) -> None:
        engine = self._engine
        try:
            while True:
                if handle is not None:
                    result = await handle
                    if lane.current is not None:
                        lane.current._finish(result)
                        lane.current = None
                    self._remember(session_id, result)
                    self._requeue_follow_ups(session_id, lane, result)
                    handle = None
                st = engine.running(session_id)
                if st is not None and st.control.task is not None:
                    # A turn started outside send (start_turn): its owner runs its follow-ups.
                    await asyncio.wait([st.control.task])
                    continue
                if not lane.pending:
                    return
                if not engine.has_slot():
                    await engine.wait_slot()
                    continue
                item = lane.pending.popleft()
                self._mirror(session_id, lane, sync=False)  # the turn's first checkpoint
                try:
                    handle = engine.start(item.text, session_id, item.agent, item.message_id)
                except SessionBusyError:  # started elsewhere in between: wait for that one
                    lane.pending.appendleft(item)
                    self._mirror(session_id, lane, sync=False)
                    await asyncio.sleep(0)
                    continue
                except Exception as exc:  # a pending checkpoint, the loop closing: say so
                    engine.reject(item.receipt, f"its turn could not start: {exc}")
                    item._fail(exc)
                    self._mirror(session_id, lane)  # and out of the checkpoint that held it
                    continue
                item._started(handle)
                lane.current = item
        finally:
            lane.runner = None
            lane.idle.set()
            if not lane.pending and self._lanes.get(session_id) is lane:
                del self._lanes[session_id]

    def _remember(self, session_id: str, result: TurnResult) -> None:
        self._recent[session_id] = result
        self._recent.move_to_end(session_id)
        if len(self._recent) > RECENT_RESULTS:
            self._recent.popitem(last=False)

    def _requeue_follow_ups(self, session_id: str, lane: _Lane, result: TurnResult) -> None:
        """Follow-ups the turn hands back run next: after messages that interrupted it, before
        messages queued with ``follow_up``."""
        if result.status not in (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS):
            return
        at = sum(1 for q in lane.pending if q.urgent)
        ids = result.follow_up_ids or ("",) * len(result.follow_ups)
        for text, origin in reversed(list(zip(result.follow_ups, ids, strict=True))):
            r = MessageReceipt("send", text, session_id, origin_id=origin or None)
            r._holder = lane
            lane.pending.insert(at, QueuedTurn(r, "queued", None))
        for item in list(lane.pending)[at:at + len(result.follow_ups)]:
            self._engine.accept(item.receipt, "a follow-up its turn handed back")
        if result.follow_ups:
            self._mirror(session_id, lane)

    # -- waiting and shutdown -----------------------------------------------------------------

    async def wait_session(self, session_id: str) -> TurnResult | None:
        """Wait until the session has no turn running and nothing queued; the last result."""
        while True:
            lane = self._lanes.get(session_id)
            if lane is not None and lane.runner is not None:
                await lane.idle.wait()
                continue
            st = self._engine.running(session_id)
            if st is not None and st.control.task is not None:
                await asyncio.wait([st.control.task])
                continue
            return self._recent.get(session_id)

    def drop_queued(self, session_id: str) -> list[str]:
        """Withdraw the messages waiting for a turn of their own; their awaitables raise."""
        lane = self._lanes.get(session_id)
        if lane is None:
            return []
        dropped = list(lane.pending)
        lane.pending.clear()
        self._mirror(session_id, lane)
        for item in dropped:
            self._engine.settle(item.receipt, MessageState.REVOKED, "withdrawn by drop_queued")
            item._fail(RuntimeError("the message was withdrawn before its turn started"))
        return [item.text for item in dropped]

    def close(self) -> None:
        """Start no more turns; fail what waits (the loop is closing)."""
        self._closed = True
        for session_id, lane in self._lanes.items():
            for item in lane.pending:
                self._engine.settle(item.receipt, MessageState.REJECTED,
                             "the loop closed before its turn started")
                item._fail(RuntimeError("the loop closed before this message's turn started"))
            lane.pending.clear()
            self._mirror(session_id, lane)

    async def aclose(self, grace: float) -> None:
        """Stop the runners (after ``close`` and after the turns have ended)."""
        self.close()
        runners = self.runners()
        for task in runners:
            task.cancel()
        if runners:
            await asyncio.wait(runners, timeout=grace)
        for lane in self._lanes.values():
            if lane.current is not None:
                lane.current._fail(RuntimeError("the loop closed while this message's turn ran"))
