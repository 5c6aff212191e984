"""Copies every event of a worker's loop into its session's capped Redis stream.

Sub-turn events go to the stream of their top-level session, so a follower sees the whole
tree. Each stream keeps about ``events_maxlen`` entries (approximate trimming, which Redis does
in whole nodes, cheaply) and expires ``events_ttl`` seconds after its last event. An ``APPROVAL_REQUESTED`` also records which worker to send the
answer to. While Redis is down the batch waits (the loop's subscription buffer holds what comes
meanwhile; beyond it events are dropped and counted, as for any slow subscriber).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from steerable._events import Event, EventKind, event_to_dict
from steerable._top_session import TopSessions
from steerable.scale._protocol import encode

if TYPE_CHECKING:
    from steerable.scale._worker import RedisWorker

__all__ = ["EventPublisher"]

log = logging.getLogger("steerable.scale")


class EventPublisher:
    def __init__(self, worker: RedisWorker) -> None:
        self.worker = worker
        self._sub = worker.loop.subscribe(buffer=65_536)
        self._give_up_at: float | None = None
        self._top = TopSessions()
        """The session whose stream an event goes to (sub-turns: their top-level one)."""

    def close(self, grace: float = 2.0) -> None:
        """Stop after publishing what is buffered, trying for at most ``grace`` seconds more
        (a worker stopping while Redis is down must not wait for it forever)."""
        self._give_up_at = time.monotonic() + grace
        self._sub.close()

    def _session_of(self, event: Event) -> str | None:
        return self._top(event) or None

    async def run(self) -> None:
        async for first in self._sub:
            batch = [first, *self._sub.drain_nowait()]
            await self._publish(batch)

    async def _publish(self, batch: list[Event]) -> None:
        w = self.worker
        rows: list[tuple[str, str]] = []
        approvals: list[tuple[str, bool]] = []
        for event in batch:
            session_id = self._session_of(event)
            if session_id is not None:
                rows.append((session_id, encode(event_to_dict(event))))
            if event.kind is EventKind.APPROVAL_REQUESTED:
                approvals.append((getattr(event, "request_id", ""), True))
            elif event.kind is EventKind.APPROVAL_RESOLVED:
                approvals.append((getattr(event, "request_id", ""), False))
        delay = 0.05
        while True:
            try:
                pipe: Any = w._redis.pipeline(transaction=False)
                for session_id, data in rows:
                    pipe.xadd(w.keys.events(session_id), {"e": data},
                              maxlen=w.events_maxlen, approximate=True)
                for session_id in {session_id for session_id, _ in rows}:
                    # An idle session's events go away after a while; its history stays.
                    pipe.expire(w.keys.events(session_id), w.events_ttl)
                for request_id, opened in approvals:
                    if opened:
                        pipe.set(w.keys.approval(request_id), w.worker_id, ex=24 * 3600)
                    else:
                        pipe.delete(w.keys.approval(request_id))
                await pipe.execute()
                return
            except w._errors as exc:
                if self._give_up_at is not None and time.monotonic() > self._give_up_at:
                    log.warning("dropping %d event(s): Redis is down and the worker stops (%s)",
                                len(rows), exc)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
