"""Per-session event fan-out for server-sent events, with a bounded replay buffer.

One observer of the loop's bus feeds every SSE client: each event is turned into JSON once and appended
to its session's ring, which every client of the session reads at its own position (the last
``replay`` events serve ``Last-Event-ID``). Publishing costs the same for 1 client or 1,000 (a
queue per client cost ~6 us per event per client). Waking the clients does not: each wake-up is
a step per client (a task's, ~4 us, for a client read as an iterator; a direct ASGI send for a
``HubFeed``, which the hub writes itself from one callback), so while events stream the clients
of a session are woken at most once per ``flush`` seconds (1 ms): the first event after a quiet
spell and a top-level ``TURN_END`` wake them at the next loop cycle, an event in a burst waits
at most ``flush``. (Woken once per loop iteration, 100 clients cost ~7x the loop itself;
bench/peer ``--features sse:100``. Holding the first event for the flush too saved ~10% of the
fan-out's CPU on short turns and cost its latency: p50 0.5 -> 1.4 ms, bench/bench_server.py.)
A client may fall ``client_buffer`` events behind: past that it loses the oldest (counted on it
and hub-wide), never slows the loop or the other clients. Events of sub-turns go to the session
of their top-level turn, whatever session id the child carries.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from steerable._core._bus import Subscription
from steerable._core._watchdog import bare_context
from steerable._events import Event, EventKind, event_to_dict
from steerable._secrets import redacted_json
from steerable.drivers._top_session import TopSessions
from steerable.server._sse import Writer

__all__ = ["EventHub", "HubClient", "HubFeed", "SSEItem", "sse_bytes"]

SSEItem = tuple[int, str]
"""An event ready to send: its ``seq`` and its JSON form."""


class _Channel:
    """A session's events: one ring that every client of the session reads at its own position.

    Positions count every event the channel ever took; the ring keeps the newest ``size``.
    Publishing is O(1) whatever the number of clients: it appends, and wakes the clients that
    wait (a future each, in one list replaced after each wake-up), which then read all that
    arrived since their position in one go.
    """

    __slots__ = ("clients", "count", "last_seq", "loop", "pushed", "ring", "running", "sent",
                 "timer", "waiters", "woken")

    def __init__(self, size: int) -> None:
        self.ring: deque[SSEItem] = deque(maxlen=size)
        self.count = 0
        self.clients: set[HubClient] = set()
        self.last_seq = 0
        self.running: dict[str, int] = {}
        """Top-level turns under way: turn id -> the seq of their TURN_START."""
        self.waiters: list[asyncio.Future[None]] = []
        """A future per waiting client. (An ``asyncio.Event`` does the same with a call and a
        deque removal more per client and wake-up: ~1 us, 100 clients, several wake-ups a
        turn.) A cancelled client's future is done, and skipped."""
        self.woken = float("-inf")
        """When the clients were last woken (the loop's clock)."""
        self.pushed: list[HubClient] = []
        """The clients the hub writes itself, at each wake-up (``HubFeed``)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the clients wait in (set by the first that waits or is pushed to)."""
        self.timer: asyncio.Handle | None = None
        """The wake-up due: at the next loop cycle (the first event after a quiet spell, a
        top-level ``TURN_END``), or at ``woken + flush`` (an event in a burst)."""
        self.sent: tuple[int, int, bytes] = (0, 0, b"")
        """The SSE bytes of the events from one position to another, last encoded: every
        client that kept up reads that same range after a wake-up (``EventHub.frames``)."""

    def wake_up(self) -> None:
        self.timer = None
        if self.loop is not None:
            self.woken = self.loop.time()
        waiters = self.waiters
        if waiters:
            self.waiters = []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        count = self.count
        for client in self.pushed:
            # One callback writes every connection: per client a send that (almost always)
            # completes without waiting, where a task per client cost a task step each.
            writer = client.writer
            if client.position < count and writer is not None and writer.ready:
                writer.write(client.take_sse())

    def oldest(self) -> int:
        """The position of the oldest event still in the ring."""
        return self.count - len(self.ring)


@dataclass(eq=False, slots=True)
class HubClient:
    """One SSE connection's view of a session: where it has read up to, and how far behind
    it may fall before it loses the oldest events (counted in ``dropped``)."""

    session_id: str
    channel: _Channel
    position: int
    limit: int
    skipped: int = 0
    attached: bool = True
    writer: Writer | None = None
    """The connection the hub writes this client's events to itself (``HubFeed``)."""

    @property
    def dropped(self) -> int:
        """Events this client lost: skipped already, or (while attached) about to be, being
        more than ``limit`` behind."""
        if not self.attached:
            return self.skipped
        return self.skipped + max(0, self.channel.count - self.position - self.limit)

    def take(self) -> list[SSEItem]:
        """Everything that arrived since the last take (the newest ``limit`` if it fell
        further behind), without waiting; nothing once detached."""
        start, end = self._advance()
        if start == end:
            return []
        ring, base = self.channel.ring, self.channel.oldest()
        return [ring[i - base] for i in range(start, end)]

    def take_sse(self) -> bytes:
        """``take`` as the SSE wire (``id`` and ``data`` lines per event). The bytes of a range
        are made once for every client that reads the same range (all that keep up)."""
        channel, position = self.channel, self.position
        sent = channel.sent
        if (sent[0] == position and sent[1] == channel.count and self.attached
                and sent[1] - position <= self.limit):
            # Another client made these bytes since the ring last changed (so the range is
            # still in it) and this one is within its limit: the common case, per client and
            # wake-up, without _advance's arithmetic.
            self.position = sent[1]
            return sent[2]
        start, end = self._advance()
        if start == end:
            return b""
        channel = self.channel
        sent = channel.sent
        if sent[0] != start or sent[1] != end:
            ring, base = channel.ring, channel.oldest()
            wire = "".join([_sse(*ring[i - base]) for i in range(start, end)]).encode()
            sent = channel.sent = (start, end, wire)
        return sent[2]

    def top_up(self) -> None:
        """Write what arrived while the connection was busy with an earlier send."""
        writer = self.writer
        if self.position < self.channel.count and writer is not None and writer.ready:
            writer.write(self.take_sse())

    def _advance(self) -> tuple[int, int]:
        """The positions to read from and to; the client is then at the end."""
        channel = self.channel
        if not self.attached:
            return 0, 0
        start = max(self.position, channel.count - self.limit, channel.oldest())
        self.skipped += start - self.position
        self.position = channel.count
        return start, channel.count


async def sse_bytes(items: AsyncIterator[SSEItem]) -> AsyncIterator[bytes]:
    """Events as SSE bytes, one piece per event (runners without a hub of their own)."""
    async for seq, data in items:
        yield _sse(seq, data).encode()


_LINES = re.compile(r"\r\n|\r|\n")


def _sse(seq: int, data: str) -> str:
    """One event as SSE lines, as sse-starlette writes a ``{"id", "data"}`` message."""
    if "\n" in data or "\r" in data:  # (never in compact JSON; kept for any other text)
        data = "\r\ndata: ".join(_LINES.split(data))
    return f"id: {seq}\r\ndata: {data}\r\n\r\n"


class EventHub:
    def __init__(self, redact: Callable[[str], str], *, replay: int = 2048,
                 client_buffer: int = 4096, sessions: int = 4096, flush: float = 0.001) -> None:
        self._redact = redact
        self._flush = flush
        self._replay = replay
        self._client_buffer = client_buffer
        self._ring = max(replay, client_buffer, 1)
        self._max_sessions = sessions
        self._channels: dict[str, _Channel] = {}
        self._route = TopSessions()
        """The session whose channel an event goes to (sub-turns: their top-level one)."""
        self._dropped_gone = 0
        """Events lost by clients that have since detached."""

    @property
    def dropped(self) -> int:
        """Events lost to SSE clients that did not keep up, over all clients."""
        return self._dropped_gone + sum(c.dropped for ch in self._channels.values()
                                        for c in ch.clients)

    def _channel(self, session_id: str) -> _Channel:
        channel = self._channels.get(session_id)
        if channel is None:
            if len(self._channels) >= self._max_sessions:
                self._forget_one()
            channel = self._channels[session_id] = _Channel(self._ring)
        return channel

    def _forget_one(self) -> None:
        # The oldest channel nobody watches gives its replay buffer up (dicts keep order).
        for sid, channel in self._channels.items():
            if not channel.clients:
                del self._channels[sid]
                return

    def publish(self, event: Event) -> None:
        sid = self._route(event)
        if not sid:
            return  # loop-wide notices belong to no session
        data = redacted_json(event_to_dict(event), self._redact)
        channel = self._channel(sid)
        channel.ring.append((event.seq, data))
        channel.count += 1
        channel.last_seq = event.seq
        end = False
        if event.parent_turn_id is None:
            if event.kind is EventKind.TURN_START:
                channel.running[event.turn_id] = event.seq
            elif event.kind is EventKind.TURN_END:
                channel.running.pop(event.turn_id, None)
                end = True
        if channel.waiters or channel.pushed:
            self._wake(channel, end)

    def _wake(self, channel: _Channel, now: bool) -> None:
        """Wake the clients at the next loop cycle (not inside the turn's ``emit``: writing
        every connection there would delay the turn's result), or at ``woken + flush`` when
        they were woken less than ``flush`` ago (see the module docstring)."""
        loop = channel.loop
        assert loop is not None
        if now:
            if channel.timer is not None:
                channel.timer.cancel()
            channel.timer = loop.call_soon(channel.wake_up, context=bare_context())
        elif channel.timer is None:
            due = channel.woken + self._flush
            if loop.time() >= due:
                channel.timer = loop.call_soon(channel.wake_up, context=bare_context())
            else:
                channel.timer = loop.call_at(due, channel.wake_up, context=bare_context())

    async def pump(self, sub: Subscription) -> None:
        """Feed the hub from ``sub`` until it is closed."""
        async for event in sub:
            self.publish(event)

    def cursor(self, session_id: str) -> int:
        """Where a viewer that has just read the saved history should resume events from:
        before the running turn's TURN_START (its messages are not saved yet), else now."""
        channel = self._channels.get(session_id)
        if channel is None:
            return 0
        if channel.running:
            return min(channel.running.values()) - 1
        return channel.last_seq

    def attach(self, session_id: str, after: int | None, buffer: int | None = None) -> HubClient:
        """A new client; with ``after`` (a ``Last-Event-ID``) it first gets the buffered
        events with a greater seq (of the last ``replay``). ``buffer``: how far behind it may
        fall before it loses events (default: the hub's ``client_buffer``)."""
        channel = self._channel(session_id)
        limit = min(self._client_buffer if buffer is None else max(buffer, 1), self._ring)
        position = channel.count
        if after is not None:
            first = max(channel.oldest(), channel.count - self._replay)
            base = channel.oldest()
            position = next((i for i in range(first, channel.count)
                             if channel.ring[i - base][0] > after), channel.count)
        client = HubClient(session_id, channel, position, limit)
        channel.clients.add(client)
        return client

    def feed(self, client: HubClient) -> HubFeed:
        """``client`` as a ``Feed``: the hub writes its connection itself (what ``steerable
        serve`` does; ``frames`` is the same as an iterator, read by a task per client)."""
        return HubFeed(self, client)

    def detach(self, client: HubClient) -> None:
        if client.attached:
            client.skipped = client.dropped
            client.attached = False
            client.channel.clients.discard(client)
            if client.writer is not None:
                client.channel.pushed.remove(client)
                client.writer = None
            self._dropped_gone += client.skipped

    def forget(self, session_id: str) -> None:
        """Drop a deleted session's ring (only when no client reads it)."""
        channel = self._channels.get(session_id)
        if channel is not None and not channel.clients:
            del self._channels[session_id]

    def client_count(self) -> int:
        return sum(len(c.clients) for c in self._channels.values())

    async def stream(self, client: HubClient) -> AsyncIterator[SSEItem]:
        try:
            while True:
                await self._arrived(client)
                for item in client.take():
                    yield item
        finally:
            self.detach(client)

    async def frames(self, client: HubClient) -> AsyncIterator[bytes]:
        """``stream`` as SSE bytes, one piece per wake-up with every event since the last:
        what ``steerable serve`` sends. Per client and wake-up this is one send; encoding a
        message per event per client (sse-starlette's) cost more than the loop itself."""
        channel = client.channel
        try:
            while True:
                # _arrived, inlined: this runs per client at every wake-up.
                while client.position >= channel.count:
                    loop = channel.loop = asyncio.get_running_loop()
                    fut = loop.create_future()
                    channel.waiters.append(fut)
                    await fut
                if wire := client.take_sse():
                    yield wire
        finally:
            self.detach(client)

    @staticmethod
    async def _arrived(client: HubClient) -> None:
        """Return once an event arrived past the client's position."""
        channel = client.channel
        while client.position >= channel.count:
            loop = channel.loop = asyncio.get_running_loop()
            fut = loop.create_future()
            channel.waiters.append(fut)
            await fut


class HubFeed:
    """A hub client whose connection the hub writes itself (see ``_sse.Feed``): at each
    wake-up, and when a send that had to wait is done."""

    __slots__ = ("client", "hub")

    def __init__(self, hub: EventHub, client: HubClient) -> None:
        self.hub = hub
        self.client = client

    def open(self, writer: Writer) -> None:
        client = self.client
        if not client.attached:
            return
        writer.on_ready = client.top_up
        client.writer = writer
        channel = client.channel
        channel.loop = asyncio.get_running_loop()
        channel.pushed.append(client)
        client.top_up()  # the replay a Last-Event-ID asked for

    def close(self) -> None:
        self.hub.detach(self.client)
