"""``RedisRunner``: the server's ``SessionRunner`` when several processes share the sessions.

Each ``steerable serve --redis URL`` process is a front end and a ``RedisWorker`` at once: a
request posted to any of them goes through Redis to the worker that holds the session (or
queues the message for whichever worker takes it), and ``GET .../events`` follows the
session's Redis stream, whichever worker runs its turns. SSE ids are the stream entry ids
packed into one integer (``ms * 4096 + sequence``, below 2**53 so the page's JavaScript keeps
them exact): ``Last-Event-ID`` resumes from the stream on any process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from steerable._core._checkpoint import Checkpoint, CheckpointStore
from steerable._parts import Part
from steerable._secrets import redacted
from steerable.drivers._lanes import BusyPolicy
from steerable.errors import SessionBusyError, UnknownRequestError
from steerable.scale import RedisWorker
from steerable.server._hub import SSEItem, sse_bytes
from steerable.server._requests_api import request_json
from steerable.server._runner import (
    CancelModeName,
    InterruptModeName,
    Sent,
    Taken,
    message_json,
    pending_or_error,
)
from steerable.server._worker_task import WorkerTask

__all__ = ["RedisRunner", "pack_id", "unpack_id"]

_SPREAD = 4096


def pack_id(entry_id: str) -> int:
    ms, _, n = entry_id.partition("-")
    return int(ms) * _SPREAD + min(int(n or 0), _SPREAD - 1)


def unpack_id(packed: int) -> str:
    return f"{packed // _SPREAD}-{packed % _SPREAD}"


class RedisRunner:
    def __init__(self, worker: RedisWorker, redact: Callable[[str], str] = lambda t: t) -> None:
        self.worker = worker
        self.client = worker.client
        self.store = worker.store
        self.redact = redact
        self._running = WorkerTask(worker)

    async def start(self) -> None:
        await self._running.start()

    async def aclose(self) -> None:
        await self._running.stop()

    async def send(self, session_id: str, text: str | list[Part], policy: BusyPolicy | None, *,
                   discard_pending: bool = False) -> Sent:
        # A worker that takes a new message drops the session's pending turn itself (the user
        # moved on), so ``discard_pending`` changes nothing here.
        if not isinstance(text, str):
            raise NotImplementedError("images and files are not carried over the Redis bus yet: "
                                      "send them to a server without --redis")
        sent = await self.client.send(text, session_id, policy or "steer")
        return Sent(sent.turn_id, sent.action, sent.message_id, sent.state)

    async def _pending(self, session_id: str) -> Checkpoint | None:
        store = self.store
        if not isinstance(store, CheckpointStore):
            return None
        return await asyncio.to_thread(store.load_checkpoint, session_id)

    async def resume(self, session_id: str) -> Sent:
        if await self._busy(session_id):
            raise SessionBusyError(f"session {session_id!r} is busy; a running turn cannot be "
                                   "resumed")
        if await self._pending(session_id) is None:
            raise LookupError(f"session {session_id!r} has no pending turn")
        sent = await self.client.resume(session_id)
        return Sent(None, "resumed" if sent.action == "started" else sent.action)

    async def discard_pending(self, session_id: str) -> None:
        if await self._busy(session_id):
            raise SessionBusyError(f"session {session_id!r} is busy; its pending turn, if any, "
                                   "is the running one")
        store = self.store
        if not isinstance(store, CheckpointStore) or not await asyncio.to_thread(
                store.delete_checkpoint, session_id):
            raise LookupError(f"session {session_id!r} has no pending turn")

    async def steer(self, session_id: str, text: str) -> Taken:
        ack = await self.client.steer(text, session_id)
        return Taken(ack.ok, ack.message_id, ack.state, ack.detail)

    async def follow_up(self, session_id: str, text: str) -> Taken:
        # As the local runner: a busy session queues it for a turn of its own (here in the
        # session's Redis queue, durable before this answers); an idle one has nothing to
        # follow.
        if not await self._busy(session_id):
            return Taken(False, None, "rejected", "no turn is active")
        sent = await self.client.send(text, session_id, "follow_up")
        return Taken(True, sent.message_id, sent.state)

    # What waits is in the turn of whichever worker holds the session and in its Redis queue:
    # the client lists it from both and finds a message by its id alone.

    async def queue(self, session_id: str) -> list[dict[str, Any]]:
        return list(redacted(await self.client.queue(session_id), self.redact))

    async def revoke(self, message_id: str) -> bool:
        return await self.client.revoke(message_id)

    async def edit(self, message_id: str, text: str) -> bool:
        return await self.client.edit(message_id, text)

    async def interrupt(self, session_id: str, mode: InterruptModeName) -> bool:
        return await self.client.interrupt(session_id, mode)

    async def cancel(self, session_id: str, mode: CancelModeName) -> bool:
        return await self.client.cancel(session_id, mode)

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool:
        return await self.client.resolve_approval(request_id, approved, reason)

    async def pending_requests(self, session_id: str | None) -> list[dict[str, Any]]:
        """The requests raised on this worker and still open, and every parked one (the
        store's index); a live request of another worker is answered through it, but not
        listed here."""
        pending = self.worker.loop.pending_requests(session_id)
        return list(redacted([request_json(r) for r in pending], self.redact))

    async def answer_request(self, request_id: str, approved: bool | None, value: Any,
                             reason: str) -> str | None:
        """Through the worker that raised the request, or the store (``RedisClient``); a
        turn it resumes starts on whichever worker takes its session: no turn id yet."""
        if approved is None:
            await self.client.answer(request_id, value)
        elif not await self.client.resolve_approval(request_id, approved, reason):
            raise UnknownRequestError(f"no open request {request_id!r}")
        return None

    async def _busy(self, session_id: str) -> bool:
        return await self.client.holder(session_id) is not None

    async def list_sessions(self) -> list[dict[str, Any]]:
        infos = await asyncio.to_thread(self.store.list_sessions)
        busy = await asyncio.gather(*(self._busy(i.session_id) for i in infos))
        return list(redacted([{"id": i.session_id, "title": i.title, "messages": i.message_count,
                               "updated": i.updated, "busy": b}
                              for i, b in zip(infos, busy, strict=True)], self.redact))

    async def get_session(self, session_id: str) -> dict[str, Any]:
        redis = self.client._redis
        last = await redis.xrevrange(self.client.keys.events(session_id), count=1)
        cursor = pack_id(last[0][0].decode()) if last else 0
        busy = await self._busy(session_id)
        exists = await asyncio.to_thread(self.store.exists, session_id)
        pending = None if busy else await pending_or_error(self._pending(session_id))
        if not exists and not busy and pending is None:
            raise LookupError(f"no session {session_id!r}")
        messages = await asyncio.to_thread(self.store.load, session_id)
        queued = await redis.lrange(self.client.keys.queue(session_id), 0, -1)
        return dict(redacted({"id": session_id, "messages": [message_json(m) for m in messages],
                              "busy": busy, "queued": [str(json.loads(q)["text"]) for q in queued],
                              "pending_turn": pending, "events_after": cursor}, self.redact))

    async def delete_session(self, session_id: str) -> None:
        if await self._busy(session_id):
            raise SessionBusyError(f"session {session_id!r} is busy; interrupt it first")
        if not await asyncio.to_thread(self.store.delete, session_id):
            raise LookupError(f"no session {session_id!r}")
        await self.client._redis.delete(self.client.keys.events(session_id))

    def sse(self, session_id: str, after: int | None) -> AsyncIterator[bytes]:
        return sse_bytes(self.events(session_id, after))

    async def events(self, session_id: str, after: int | None) -> AsyncIterator[SSEItem]:
        # As ``LocalRunner``'s: ``after`` resumes after that event (0: from the oldest kept),
        # None follows from now on (the protocol front ends attach so before a turn starts).
        if after is None:
            newest = await self.client._redis.xrevrange(self.client.keys.events(session_id),
                                                        count=1)
            last = newest[0][0].decode() if newest else None
        else:
            last = unpack_id(after) if after else None
        async for item in self.client.events(session_id, last):
            yield pack_id(item.id), json.dumps(redacted(item.data, self.redact), ensure_ascii=False)
