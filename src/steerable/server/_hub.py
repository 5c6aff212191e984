"""Per-session event fan-out for server-sent events, with a bounded replay buffer.

One loop subscription feeds every SSE client: each event is turned into JSON once, appended to
its session's replay buffer (the last ``replay`` events, for ``Last-Event-ID``) and offered to
each client of that session. A client's queue is bounded: a client that does not keep up loses
events (counted on it and hub-wide), never slows the loop or the other clients. Events of
sub-turns go to the session of their top-level turn, whatever session id the child carries.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from steerable._core._bus import Subscription
from steerable._events import Event, EventKind, event_to_dict
from steerable._secrets import redacted
from steerable.drivers._top_session import TopSessions

__all__ = ["EventHub", "HubClient", "SSEItem"]

SSEItem = tuple[int, str]
"""An event ready to send: its ``seq`` and its JSON form."""


@dataclass(eq=False, slots=True)
class HubClient:
    """One SSE connection's view of a session."""

    session_id: str
    queue: asyncio.Queue[SSEItem]
    dropped: int = 0


@dataclass(slots=True)
class _Channel:
    replay: deque[SSEItem]
    clients: set[HubClient] = field(default_factory=set)
    last_seq: int = 0
    running: dict[str, int] = field(default_factory=dict)
    """Top-level turns under way: turn id -> the seq of their TURN_START."""


class EventHub:
    def __init__(self, redact: Callable[[str], str], *, replay: int = 2048,
                 client_buffer: int = 4096, sessions: int = 4096) -> None:
        self._redact = redact
        self._replay = replay
        self._client_buffer = client_buffer
        self._max_sessions = sessions
        self._channels: dict[str, _Channel] = {}
        self._route = TopSessions()
        """The session whose channel an event goes to (sub-turns: their top-level one)."""
        self.dropped = 0
        """Events lost to SSE clients that did not keep up, over all clients."""

    def _channel(self, session_id: str) -> _Channel:
        channel = self._channels.get(session_id)
        if channel is None:
            if len(self._channels) >= self._max_sessions:
                self._forget_one()
            channel = self._channels[session_id] = _Channel(deque(maxlen=self._replay))
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
        data = json.dumps(redacted(event_to_dict(event), self._redact), ensure_ascii=False)
        channel = self._channel(sid)
        item = (event.seq, data)
        channel.replay.append(item)
        channel.last_seq = event.seq
        if event.parent_turn_id is None:
            if event.kind is EventKind.TURN_START:
                channel.running[event.turn_id] = event.seq
            elif event.kind is EventKind.TURN_END:
                channel.running.pop(event.turn_id, None)
        for client in channel.clients:
            try:
                client.queue.put_nowait(item)
            except asyncio.QueueFull:
                client.dropped += 1
                self.dropped += 1

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
        events with a greater seq. ``buffer``: its queue size (default: the hub's)."""
        channel = self._channel(session_id)
        size = self._client_buffer if buffer is None else max(buffer, 1)
        client = HubClient(session_id, asyncio.Queue(size))
        if after is not None:
            for item in channel.replay:
                if item[0] > after:
                    try:
                        client.queue.put_nowait(item)
                    except asyncio.QueueFull:
                        client.dropped += 1
        channel.clients.add(client)
        return client

    def detach(self, client: HubClient) -> None:
        channel = self._channels.get(client.session_id)
        if channel is not None:
            channel.clients.discard(client)

    def forget(self, session_id: str) -> None:
        """Drop a deleted session's replay buffer (its clients keep their queues)."""
        channel = self._channels.get(session_id)
        if channel is not None and not channel.clients:
            del self._channels[session_id]

    def client_count(self) -> int:
        return sum(len(c.clients) for c in self._channels.values())

    async def stream(self, client: HubClient) -> AsyncIterator[SSEItem]:
        try:
            while True:
                yield await client.queue.get()
        finally:
            self.detach(client)
