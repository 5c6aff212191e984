"""``TemporalRunner``: the server's ``SessionRunner`` when the sessions run on Temporal.

Each ``steerable serve --temporal HOST:PORT`` process is a front end and a ``TemporalWorker``
at once (as ``serve --redis`` is a front end and a Redis worker): a request posted to any of
them becomes a workflow update of the session, whichever worker runs it, and ``GET
.../events`` follows the session's Redis stream (``--redis URL``). SSE ids are the stream
entry ids packed into one integer, as with ``--redis``: ``Last-Event-ID`` resumes on any
process. A turn on Temporal never pends (it continues on another worker instead), so there is
nothing to resume or discard.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from steerable import BusyPolicy
from steerable._secrets import redacted
from steerable.errors import SessionBusyError, UnknownRequestError
from steerable.server._hub import SSEItem, sse_bytes
from steerable.server._redis_runner import pack_id, unpack_id
from steerable.server._runner import (
    CancelModeName,
    InterruptModeName,
    Sent,
    Taken,
    message_json,
)
from steerable.server._worker_task import WorkerTask
from steerable.temporal import TemporalClient, TemporalWorker

__all__ = ["TemporalRunner"]

_NEVER_PENDING = "no pending turn: on Temporal a turn continues on another worker instead"


class TemporalRunner:
    """``connect`` makes the client once the server runs (in its event loop)."""

    def __init__(self, worker: TemporalWorker,
                 connect: Callable[[], Awaitable[TemporalClient]],
                 redact: Callable[[str], str] = lambda t: t) -> None:
        self.worker = worker
        self._connect = connect
        self._client: TemporalClient | None = None
        self.redact = redact
        self._running = WorkerTask(worker)

    @property
    def client(self) -> TemporalClient:
        if self._client is None:
            raise RuntimeError("the Temporal runner has not started")
        return self._client

    async def start(self) -> None:
        self._client = await self._connect()
        await self._running.start()

    async def aclose(self) -> None:
        await self._running.stop()
        if self._client is not None:
            await self._client.aclose()

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None, *,
                   discard_pending: bool = False) -> Sent:
        r = await self.client.send(text, session_id, policy)
        return Sent(r.turn_id, r.action or "started", r.message_id, r.state)

    async def steer(self, session_id: str, text: str) -> Taken:
        r = await self.client.inject_steering(text, session_id)
        return Taken(bool(r), r.message_id or None, r.state)

    async def follow_up(self, session_id: str, text: str) -> Taken:
        r = await self.client.inject_follow_up(text, session_id)
        return Taken(bool(r), r.message_id or None, r.state)

    async def interrupt(self, session_id: str, mode: InterruptModeName) -> bool:
        if mode == "graceful":
            return await self.client.interrupt_graceful(session_id)
        return await self.client.interrupt_hard(session_id)

    async def cancel(self, session_id: str, mode: CancelModeName) -> bool:
        return await self.client.cancel(session_id, mode)

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool:
        return await self.client.resolve_approval(request_id, approved, reason)

    async def pending_requests(self, session_id: str | None) -> list[dict[str, Any]]:
        """Every approval and question the sessions' workflows wait on (their memos)."""
        return list(redacted(await self.client.pending_requests(session_id), self.redact))

    async def answer_request(self, request_id: str, approved: bool | None, value: Any,
                             reason: str) -> str | None:
        """The waiting turn goes on in its workflow (it never parked): no new turn id."""
        if approved is None:
            await self.client.answer(request_id, value)
        elif not await self.client.resolve_approval(request_id, approved, reason):
            raise UnknownRequestError(f"no open request {request_id!r}")
        return None

    async def queue(self, session_id: str) -> list[dict[str, Any]]:
        state = await self.client.state(session_id)
        return list(redacted(state["queued"] if state else [], self.redact))

    async def revoke(self, message_id: str) -> bool:
        return await self.client.revoke_message(message_id)

    async def edit(self, message_id: str, text: str) -> bool:
        return await self.client.edit_message(message_id, text)

    async def resume(self, session_id: str) -> Sent:
        raise LookupError(_NEVER_PENDING)

    async def discard_pending(self, session_id: str) -> None:
        raise LookupError(_NEVER_PENDING)

    async def list_sessions(self) -> list[dict[str, Any]]:
        rows = [{k: r[k] for k in ("id", "title", "messages", "updated", "busy")}
                for r in await self.client.list_sessions()]
        return list(redacted(rows, self.redact))

    async def get_session(self, session_id: str) -> dict[str, Any]:
        log = self._log()
        last = await log.last_id(session_id)
        state = await self.client.state(session_id)
        if state is None:
            raise LookupError(f"no session {session_id!r}")
        messages = await self.client.session_messages(session_id)
        return dict(redacted({"id": session_id, "messages": [message_json(m) for m in messages],
                              "busy": state["busy"],
                              "queued": [q["text"] for q in state["queued"]],
                              "pending_turn": None,
                              "events_after": pack_id(last) if last else 0}, self.redact))

    async def delete_session(self, session_id: str) -> None:
        state = await self.client.state(session_id)
        if state is None:
            raise LookupError(f"no session {session_id!r}")
        if state["busy"]:
            raise SessionBusyError(f"session {session_id!r} is busy; interrupt it first")
        await self.client.delete_session(session_id)
        await self._log().delete(session_id)

    def sse(self, session_id: str, after: int | None) -> AsyncIterator[bytes]:
        return sse_bytes(self.events(session_id, after))

    async def events(self, session_id: str, after: int | None) -> AsyncIterator[SSEItem]:
        last = unpack_id(after) if after else None
        async for entry_id, event in self.client.events(session_id, last):
            yield pack_id(entry_id), json.dumps(redacted(event, self.redact), ensure_ascii=False)

    def _log(self) -> Any:
        if self.client.log is None:
            raise ValueError("the server's Temporal client has no event stream (--redis URL)")
        return self.client.log
