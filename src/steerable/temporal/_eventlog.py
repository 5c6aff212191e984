"""The side channel that carries a session's events from Temporal workers to followers: one
capped Redis stream per session (Temporal itself keeps no live event feed a front end can read).

Two kinds of writer feed it. The workflow emits the engine's events (turn, tool, steering,
message-state...) each with a sequence number that is the same every time the workflow's code
runs: a worker that replays a session after another one died emits them again, and the
script below appends only numbers above the session's high-water mark, so each reaches the
stream once and none is lost (what the dead worker had not published yet is published by the
replay). Activities publish what happens inside a call while it runs (``LLM_DELTA``,
``TOOL_EXEC_PROGRESS``): those have number 0 and are always appended (a call that runs again
after a crash streams again, as the local engine's resumed call does).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from steerable._secrets import redacted
from steerable.scale._keys import Keys

__all__ = ["DEFAULT_PREFIX", "EventLog", "StreamedEvent"]

log = logging.getLogger("steerable.temporal")

DEFAULT_PREFIX = "steerable:temporal:"

# KEYS: events, high-water mark   ARGV: max length, ttl, key prefix, session, then
# (number, event, index) triples; index "+NAME" points key prefix..NAME at the session (an open
# approval or question, a queued message: an answer or a withdrawal by id finds the workflow), "-NAME"
# drops it, "" neither. Applied only with the event it comes with.
_APPEND = """
local hwm = tonumber(redis.call('GET', KEYS[2]) or '0')
local added = 0
for i = 5, #ARGV, 3 do
  local n = tonumber(ARGV[i])
  if n == 0 or n > hwm then
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[i + 1])
    added = added + 1
    if n > hwm then hwm = n end
    local op = ARGV[i + 2]  -- see above
    if string.sub(op, 1, 1) == '+' then
      redis.call('SET', ARGV[3] .. string.sub(op, 2), ARGV[4], 'EX', ARGV[2])
    elseif string.sub(op, 1, 1) == '-' then
      redis.call('DEL', ARGV[3] .. string.sub(op, 2))
    end
  end
end
redis.call('SET', KEYS[2], hwm, 'EX', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return added
"""

StreamedEvent = tuple[str, dict[str, Any]]
"""(stream entry id, the event as a JSON object)."""


class EventLog:
    """Sessions' event streams in Redis: ``append`` (workers), ``follow`` (front ends)."""

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, maxlen: int = 10_000,
                 ttl: int = 7 * 24 * 3600, redact: Callable[[str], str] | None = None) -> None:
        import redis.asyncio as aioredis  # the redis extra; imported when a log is made

        self.url = url
        self.keys = Keys(prefix)
        self.maxlen = maxlen
        self.ttl = ttl
        self.redact = redact
        self.redis: Any = aioredis.Redis.from_url(url)
        self._append = self.redis.register_script(_APPEND)
        self._index_prefix = f"{prefix}index:"

    async def aclose(self) -> None:
        await self.redis.aclose()

    def _hwm(self, session_id: str) -> str:
        return self.keys.session(session_id, "events-hwm")

    async def append(self, session_id: str, rows: Sequence[tuple[int, dict[str, Any]]]) -> int:
        """Append ``rows`` of (number, event) in order; how many were new."""
        args: list[Any] = [self.maxlen, self.ttl, self._index_prefix, session_id]
        for number, event in rows:
            args += [number, json.dumps(redacted(event, self.redact), ensure_ascii=False,
                                        separators=(",", ":")), _index(event)]
        added: int = await self._append(
            keys=[self.keys.events(session_id), self._hwm(session_id)], args=args)
        return added

    async def request_session(self, request_id: str) -> str | None:
        """The session whose turn waits on approval or question ``request_id`` (None: none
        waits)."""
        raw = await self.redis.get(f"{self._index_prefix}request:{request_id}")
        return None if raw is None else str(raw.decode())

    async def remember_message(self, message_id: str, session_id: str) -> None:
        """Index a message the moment a caller has its receipt (its ``QUEUED`` event, which
        indexes it too, may reach the stream a moment later)."""
        await self.redis.set(f"{self._index_prefix}message:{message_id}", session_id,
                             ex=self.ttl, nx=True)

    async def message_session(self, message_id: str) -> str | None:
        """The session of message ``message_id`` while it is queued (None: not queued)."""
        raw = await self.redis.get(f"{self._index_prefix}message:{message_id}")
        return None if raw is None else str(raw.decode())

    async def last_id(self, session_id: str) -> str | None:
        last = await self.redis.xrevrange(self.keys.events(session_id), count=1)
        return last[0][0].decode() if last else None

    async def delete(self, session_id: str) -> None:
        await self.redis.delete(self.keys.events(session_id), self._hwm(session_id))

    async def follow(self, session_id: str, after: str | None = None, *,
                     block: float = 1.0) -> AsyncIterator[StreamedEvent]:
        """The session's events after entry ``after`` (None: all the capped stream holds),
        forever: close the iterator to stop."""
        key = self.keys.events(session_id)
        cursor = after or "0-0"
        while True:
            got = await self.redis.xread({key: cursor}, count=256, block=int(block * 1000))
            for _, entries in got or ():
                for entry_id, fields in entries:
                    cursor = entry_id.decode()
                    yield cursor, json.loads(fields[b"e"])
            await asyncio.sleep(0)


def _index(event: dict[str, Any]) -> str:
    """The index change ``event`` makes (see ``_APPEND``)."""
    kind = event.get("kind")
    if kind in ("approval_requested", "question_asked"):
        return f"+request:{event.get('request_id', '')}"
    if kind in ("approval_resolved", "question_answered"):
        return f"-request:{event.get('request_id', '')}"
    if kind == "message_state":
        sign = "+" if event.get("state") == "queued" else "-"
        return f"{sign}message:{event.get('message_id', '')}"
    return ""


class Publisher:
    """A worker's writer: ``put`` from any thread (workflow code runs on the worker's
    workflow thread, activities on its event loop), written in order by one task."""

    def __init__(self, log_: EventLog) -> None:
        self.log = log_
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[str, list[tuple[int, dict[str, Any]]]] | None] = \
            asyncio.Queue()
        self._task = self._loop.create_task(self._run())

    def put(self, session_id: str, rows: list[tuple[int, dict[str, Any]]]) -> None:
        if rows and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (session_id, rows))

    async def _run(self) -> None:
        while (item := await self._queue.get()) is not None:
            session_id, rows = item
            delay = 0.05
            while True:
                try:
                    await self.log.append(session_id, rows)
                    break
                except Exception as exc:  # Redis down: keep the order, retry
                    log.warning("publishing %d event(s) of %s failed (%s); retrying",
                                len(rows), session_id, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)

    async def aclose(self, grace: float = 5.0) -> None:
        """Write what is queued, then stop; after ``grace`` seconds (Redis down) give up on
        the rest (a replay of the sessions publishes it later)."""
        self._queue.put_nowait(None)
        done, _ = await asyncio.wait([self._task], timeout=grace)
        if not done:
            log.warning("stopping with %d batch(es) of events unpublished", self._queue.qsize())
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
