"""Copies every event of a worker's loop into its session's capped Redis stream.

Sub-turn events go to the stream of their top-level session, so a follower sees the whole
tree. Each stream keeps about ``events_maxlen`` entries (approximate trimming, which Redis does
in whole nodes, cheaply) and expires ``events_ttl`` seconds after its last event. An
``APPROVAL_REQUESTED`` also records which worker to send the answer to. While Redis is down the
batch waits (the loop's subscription buffer holds what comes meanwhile; beyond it events are
dropped and counted, as for any slow subscriber).

The stream is fenced as the history is: a turn's events are appended (by one Lua script per
session) only while the session's fence counter is still the one of the lease the turn runs
under. A worker stopped past its lease (SIGSTOP, a long pause) and then continued finds the
counter moved on when another worker took the session, and its late events, its own TURN_END
included, are dropped instead of landing after the new holder's. The runner waits for its
turn's TURN_END to be published before it lets the session go, so its own events are never
fenced out by the next acquisition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from steerable._events import Event, EventKind, event_to_dict
from steerable._secrets import redacted
from steerable.drivers._top_session import TopSessions
from steerable.scale._host import WorkerHost
from steerable.scale._protocol import encode

__all__ = ["EventPublisher"]

log = logging.getLogger("steerable.scale")

# KEYS: events, fence   ARGV: fence number, max length, ttl, events...
# A missing counter means Redis lost its data (a restart without persistence): the holder's
# next renewal puts it back, and meanwhile its events are kept.
_APPEND = """
local fence = redis.call('GET', KEYS[2])
if fence and fence ~= ARGV[1] then return 0 end
for i = 4, #ARGV do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[i])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


class EventPublisher:
    def __init__(self, worker: WorkerHost) -> None:
        self.worker = worker
        self._sub = worker.loop.subscribe(buffer=65_536)
        self._give_up_at: float | None = None
        self._place = TopSessions().place
        """(the session whose stream an event goes to, its top-level turn): a sub-turn's are
        its parent's (one rule with the server's hub)."""
        self._append = worker._redis.register_script(_APPEND)

    def close(self, grace: float = 2.0) -> None:
        """Stop after publishing what is buffered, trying for at most ``grace`` seconds more
        (a worker stopping while Redis is down must not wait for it forever)."""
        self._give_up_at = time.monotonic() + grace
        self._sub.close()

    async def run(self) -> None:
        async for first in self._sub:
            batch = [first, *self._sub.drain_nowait()]
            await self._publish(batch)

    async def _publish(self, batch: list[Event]) -> None:
        w = self.worker
        rows: dict[tuple[str, str], list[str]] = {}
        """(session, fence number) -> its events, in order."""
        approvals: list[tuple[str, bool]] = []
        ended: list[str] = []
        for event in batch:
            session_id, top = self._place(event)
            token = w.turn_tokens.get(top)
            if token is None:
                log.debug("dropping a %s event of turn %s: no lease of this worker ran it",
                          event.kind, top)
            elif session_id:
                fence = token.rsplit(":", 1)[1]
                record = redacted(event_to_dict(event), w.redact)
                rows.setdefault((session_id, fence), []).append(encode(record))
            if event.kind is EventKind.APPROVAL_REQUESTED:
                approvals.append((getattr(event, "request_id", ""), True))
            elif event.kind is EventKind.APPROVAL_RESOLVED:
                approvals.append((getattr(event, "request_id", ""), False))
            elif event.kind is EventKind.TURN_END and event.parent_turn_id is None:
                ended.append(event.turn_id)
        await self._write(rows, approvals)
        for turn_id in ended:
            w.turn_published(turn_id)

    async def _write(self, rows: dict[tuple[str, str], list[str]],
                     approvals: list[tuple[str, bool]]) -> None:
        w = self.worker
        delay = 0.05
        while True:
            try:
                pipe: Any = w._redis.pipeline(transaction=False)
                for (session_id, fence), data in rows.items():
                    await self._append(keys=[w.keys.events(session_id), w.keys.fence(session_id)],
                                 args=[fence, w.events_maxlen, w.events_ttl, *data],
                                 client=pipe)
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
                                sum(map(len, rows.values())), exc)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
