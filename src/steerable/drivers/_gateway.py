"""``AgentLoop.run(bus)``: messages in from a bus, replies and events out, many sessions at once.

The in-process bus is two bounded queues. Inbound messages go through ``AgentLoop.send`` with
their policy, so a bus-fed session behaves exactly like one driven by ``send``. At most
``max_sessions`` sessions work at a time; a message for another idle session waits (in arrival
order, per session) until one of them is idle again, and messages for sessions already at
work are never held back by that bound. Each message gets exactly one ``OutboundReply``, when
the turn that took it ends (or at once when it is rejected). Events go out best-effort: a full
outbound queue drops them and counts the drops, like every event subscriber.

The loop is reached through ``GatewayHost``, so this module never imports ``_loop``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal, Protocol

from steerable._core._bus import Subscription
from steerable._core._turn import TurnResult
from steerable._events import Event, EventKind, TurnStatus
from steerable._records import Record, record
from steerable.drivers._lanes import BusyPolicy, SendAction, check_policy
from steerable.errors import SessionBusyError

__all__ = ["GatewayHost", "InProcessBus", "InboundMessage", "OutboundReply", "serve_bus"]

ReplyAction = SendAction | Literal["rejected", "failed"]


@record(kw_only=False)
class InboundMessage(Record):
    """A user's message for a session. ``message_id`` is echoed in its reply."""

    session_id: str
    text: str
    policy: BusyPolicy | None = None
    message_id: str = ""

    def __post_init__(self) -> None:
        if self.policy is not None:
            check_policy(self.policy)


@record(kw_only=False)
class OutboundReply(Record):
    """How an inbound message was handled; sent once the turn that took it has ended.

    ``action`` is ``send``'s answer, ``rejected`` (policy ``reject`` on a busy session) or
    ``failed`` (the message could not be run; ``error`` says why).
    """

    session_id: str
    message_id: str
    action: ReplyAction
    turn_id: str | None = None
    status: TurnStatus | None = None
    text: str = ""
    error: str | None = None


class InProcessBus:
    """Bounded inbound and outbound queues in one process."""

    def __init__(self, inbound_size: int = 1024, outbound_size: int = 4096) -> None:
        if inbound_size < 1 or outbound_size < 1:
            raise ValueError("queue sizes must be at least 1")
        self._inbound: asyncio.Queue[InboundMessage | None] = asyncio.Queue(inbound_size)
        self._outbound: asyncio.Queue[OutboundReply | Event] = asyncio.Queue(outbound_size)
        self._closed = False
        self.dropped_events = 0
        """Events not delivered because the outbound queue was full."""

    async def publish(self, message: InboundMessage) -> None:
        """Queue an inbound message; waits while the inbound queue is full."""
        if self._closed:
            raise RuntimeError("the bus is closed")
        await self._inbound.put(message)

    def close(self) -> None:
        """No more inbound messages: ``run`` answers what it took and returns."""
        if not self._closed:
            self._closed = True
            # Closing must not wait: when the queue is full, the reader finds the flag instead.
            if not self._inbound.full():
                self._inbound.put_nowait(None)

    async def inbound(self) -> AsyncIterator[InboundMessage]:
        while True:
            if self._closed and self._inbound.empty():
                return
            item = await self._inbound.get()
            if item is None:
                return
            yield item

    async def put_reply(self, reply: OutboundReply) -> None:
        await self._outbound.put(reply)

    def put_event_nowait(self, event: Event) -> None:
        try:
            self._outbound.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped_events += 1

    async def receive(self) -> OutboundReply | Event:
        """The next reply or event (front ends and channel adapters read this)."""
        return await self._outbound.get()


class GatewayHost(Protocol):
    def send(self, text: str, session_id: str, policy: BusyPolicy | None = None) -> Any: ...

    def busy(self, session_id: str) -> bool: ...

    async def wait_session(self, session_id: str) -> TurnResult | None: ...

    def subscribe(self, kinds: Iterable[EventKind] | None = None,
                  buffer: int = 256) -> Subscription: ...


async def serve_bus(host: GatewayHost, bus: InProcessBus, max_sessions: int,
                    forward_events: bool) -> None:
    """Consume ``bus`` until it is closed and every message taken has been answered."""
    if not isinstance(bus, InProcessBus):
        raise TypeError(f"bus must be an InProcessBus, got {type(bus).__name__}")
    if max_sessions < 1:
        raise ValueError("max_sessions must be at least 1")
    gate = _Gate(host, bus, max_sessions)
    async with asyncio.TaskGroup() as tasks:
        gate.tasks = tasks
        sub = host.subscribe(buffer=65536) if forward_events else None
        if sub is not None:
            tasks.create_task(_forward(sub, bus))
        try:
            async for message in bus.inbound():
                gate.accept(message)
            await gate.wait_done()
        finally:
            if sub is not None:
                sub.close()


async def _forward(sub: Subscription, bus: InProcessBus) -> None:
    async for event in sub:
        bus.put_event_nowait(event)


class _Gate:
    """Which sessions may work now; the rest wait in arrival order."""

    def __init__(self, host: GatewayHost, bus: InProcessBus, max_sessions: int) -> None:
        self.host = host
        self.bus = bus
        self.max_sessions = max_sessions
        self.tasks: asyncio.TaskGroup | None = None
        self.working: set[str] = set()
        self.waiting: OrderedDict[str, deque[InboundMessage]] = OrderedDict()
        self.idle = asyncio.Event()
        self.idle.set()

    def accept(self, message: InboundMessage) -> None:
        sid = message.session_id
        if sid in self.working or sid in self.waiting:
            if sid in self.waiting:
                self.waiting[sid].append(message)
            else:
                self._deliver(message)
        elif len(self.working) < self.max_sessions:
            self._begin(sid, [message])
        else:
            self.waiting[sid] = deque([message])
        self.idle.clear()

    def _begin(self, sid: str, messages: Iterable[InboundMessage]) -> None:
        assert self.tasks is not None
        self.working.add(sid)
        for message in messages:
            self._deliver(message)
        self.tasks.create_task(self._watch(sid))

    def _deliver(self, message: InboundMessage) -> None:
        assert self.tasks is not None
        try:
            sent = self.host.send(message.text, message.session_id, message.policy)
        except SessionBusyError as exc:
            self.tasks.create_task(self._reply(message, "rejected", error=str(exc)))
            return
        except (ValueError, TypeError, RuntimeError) as exc:
            self.tasks.create_task(self._reply(message, "failed", error=str(exc)))
            return
        self.tasks.create_task(self._answer(message, sent))

    async def _answer(self, message: InboundMessage, sent: Any) -> None:
        try:
            result: TurnResult = await sent
        except (RuntimeError, ValueError) as exc:  # withdrawn, the loop closed, a checkpoint
            await self._reply(message, "failed", turn_id=sent.turn_id, error=str(exc))
            return
        await self._reply(message, sent.action, turn_id=result.turn_id, status=result.status,
                          text=result.text,
                          error=None if result.error is None else str(result.error))

    async def _reply(self, message: InboundMessage, action: ReplyAction, **fields: Any) -> None:
        await self.bus.put_reply(OutboundReply(message.session_id, message.message_id, action,
                                               **fields))

    async def _watch(self, sid: str) -> None:
        """Free the session's slot once it is idle, and let the next waiting session in."""
        while True:
            await self.host.wait_session(sid)
            if not self.host.busy(sid):
                break
        self.working.discard(sid)
        while self.waiting and len(self.working) < self.max_sessions:
            nxt, messages = self.waiting.popitem(last=False)
            self._begin(nxt, messages)
        if not self.working and not self.waiting:
            self.idle.set()

    async def wait_done(self) -> None:
        await self.idle.wait()
