"""The seam between the HTTP layer and whatever runs the sessions.

``SessionRunner`` is everything the routes call: send a message, steer, interrupt, cancel,
answer an approval, list, withdraw and edit the messages that wait, resume or discard a pending
turn, read and delete sessions, follow a session's events. ``LocalRunner`` is
the one-process implementation over an ``AgentLoop`` and its store; a runner that spreads
sessions over several processes (a Redis bus) implements the same protocol and the routes do
not change. Runner methods raise ``SessionBusyError`` (409), ``LookupError`` (404) or
``ValueError`` (400); the routes turn those into status codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from steerable._core._bus import Observer
from steerable._core._cancel import CancelMode
from steerable._core._checkpoint import Checkpoint
from steerable._messages import Message
from steerable._parts import Part
from steerable._parts_json import part_summary
from steerable._receipts import MessageReceipt
from steerable._secrets import redacted
from steerable.drivers._handle import TurnHandle
from steerable.drivers._lanes import BusyPolicy, QueuedTurn
from steerable.drivers._loop import AgentLoop
from steerable.drivers._session_driver import SessionDriver
from steerable.errors import CheckpointError, SessionBusyError, UnknownRequestError
from steerable.server._hub import EventHub, SSEItem
from steerable.server._requests_api import request_json
from steerable.server._sse import Feed

__all__ = ["CancelModeName", "InterruptModeName", "LocalRunner", "Sent", "SessionRunner", "Taken",
           "pending_json", "pending_or_error", "pending_refusal"]

InterruptModeName = Literal["graceful", "hard"]
CancelModeName = Literal["immediate", "after_model", "after_tools"]


@dataclass(frozen=True, slots=True)
class Sent:
    """What became of a message: what was done with it, and its id and state (SPEC 10)."""

    turn_id: str | None
    action: str
    message_id: str | None = None
    state: str | None = None

    def json(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "action": self.action, "message_id": self.message_id,
                "state": self.state}


@dataclass(frozen=True, slots=True)
class Taken:
    """A steer or a follow-up: ``ok`` when the running turn (or the session) took it."""

    ok: bool
    message_id: str | None = None
    state: str | None = None
    detail: str = ""

    def json(self) -> dict[str, Any]:
        return {"ok": self.ok, "message_id": self.message_id, "state": self.state,
                "detail": self.detail}


def _taken(r: MessageReceipt | TurnHandle | QueuedTurn) -> Taken:
    if isinstance(r, MessageReceipt):
        return Taken(bool(r), r.message_id, r.state.value, r.detail)
    return Taken(True, r.message_id, r.state.value)  # sent: queued, or its own turn


class SessionRunner(Protocol):
    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def send(self, session_id: str, text: str | list[Part], policy: BusyPolicy | None, *,
                   discard_pending: bool = False) -> Sent: ...

    async def steer(self, session_id: str, text: str) -> Taken: ...

    async def follow_up(self, session_id: str, text: str) -> Taken: ...

    async def interrupt(self, session_id: str, mode: InterruptModeName) -> bool: ...

    async def cancel(self, session_id: str, mode: CancelModeName) -> bool: ...

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool: ...

    async def pending_requests(self, session_id: str | None) -> list[dict[str, Any]]: ...

    async def answer_request(self, request_id: str, approved: bool | None, value: Any,
                             reason: str) -> str | None: ...

    async def queue(self, session_id: str) -> list[dict[str, Any]]: ...

    async def revoke(self, message_id: str) -> bool: ...

    async def edit(self, message_id: str, text: str) -> bool: ...

    async def resume(self, session_id: str) -> Sent: ...

    async def discard_pending(self, session_id: str) -> None: ...

    async def list_sessions(self) -> list[dict[str, Any]]: ...

    async def get_session(self, session_id: str) -> dict[str, Any]: ...

    async def delete_session(self, session_id: str) -> None: ...

    def events(self, session_id: str, after: int | None) -> AsyncIterator[SSEItem]: ...

    def sse(self, session_id: str, after: int | None) -> Feed | AsyncIterator[bytes]:
        """``events`` as the SSE stream (``GET .../events``): its bytes, or a ``Feed`` that
        writes the connection itself."""
        ...


def message_json(message: Message) -> dict[str, Any]:
    """A message as the API shows it (before redaction, which the runner applies to the whole
    answer)."""
    out: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.parts:  # the text above reads them as placeholders; their bytes stay stored
        out["parts"] = [part_summary(p) for p in message.parts]
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                             for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.is_error:
        out["is_error"] = True
    return out


def pending_json(cp: Checkpoint) -> dict[str, Any]:
    """A pending turn as the API shows it (``GET /v1/sessions/{id}``: ``pending_turn``; before
    redaction, which the runner applies to the whole answer)."""
    return {"turn_id": cp.turn_id, "origin_turn_id": cp.origin_turn_id,
            "reason": cp.reason, "cancel_mode": cp.cancel_mode, "iteration": cp.iteration,
            "input": cp.input, "pending_tools": [c.name for c in cp.pending_calls],
            "waiting": [request_json(r) for r in cp.waiting], "updated": cp.updated}


def pending_refusal(session_id: str, cp: Checkpoint) -> CheckpointError:
    """Why a new message cannot start a turn, and the three HTTP ways on (a 409)."""
    base = f"/v1/sessions/{session_id}"
    if cp.waiting:
        ids = ", ".join(r.request_id for r in cp.waiting)
        return CheckpointError(
            f"session {session_id!r} has a turn waiting for answers ({ids}): POST "
            f"/v1/requests/ID answers each (the turn then resumes), DELETE {base}/pending_turn "
            'drops it, or send the message again with "discard_pending": true')
    why = f"cancelled ({cp.cancel_mode})" if cp.cancel_mode else "cut off (its process stopped)"
    return CheckpointError(
        f"session {session_id!r} has a pending turn, {why} after {cp.iteration} LLM call(s): "
        f"POST {base}/resume continues it, DELETE {base}/pending_turn drops it, or send the "
        'message again with "discard_pending": true')


async def pending_or_error(load: Awaitable[Checkpoint | None]) -> dict[str, Any] | None:
    """``pending_turn`` of a session: its JSON, None, or ``{"error"}`` when the checkpoint
    cannot be read (``DELETE .../pending_turn`` still drops it)."""
    try:
        cp = await load
    except CheckpointError as exc:
        return {"error": str(exc)}
    return None if cp is None else pending_json(cp)


class LocalRunner:
    """Sessions run by one ``AgentLoop`` in this process; messages go through
    ``SessionDriver.send`` (the same path as the CLI), events through an ``EventHub``."""

    def __init__(self, loop: AgentLoop, redact: Callable[[str], str] = lambda text: text, *,
                 replay: int = 2048,
                 on_delete: Callable[[str], Awaitable[object]] | None = None) -> None:
        self.loop = loop
        self.redact = redact
        self.on_delete = on_delete
        """Called with a deleted session's id (its background commands are stopped)."""
        self.hub = EventHub(redact, replay=replay, client_buffer=max(4096, replay))
        self._drivers: dict[str, SessionDriver] = {}
        self._observer: Observer | None = None

    async def start(self) -> None:
        # The hub reads events as they are emitted (a few us each, never waiting): a
        # subscription drained by a task cost a task step per loop cycle and ~5 us per event.
        self._observer = self.loop.observe(self.hub.publish)

    async def aclose(self) -> None:
        await self.loop.aclose()  # detaches the observer
        if self._observer is not None and self._observer.error is not None:
            raise self._observer.error  # the hub failed: its clients got nothing after it

    def _driver(self, session_id: str) -> SessionDriver:
        driver = self._drivers.get(session_id)
        if driver is None:
            driver = self._drivers[session_id] = SessionDriver(self.loop, session_id)
        return driver

    async def send(self, session_id: str, text: str | list[Part], policy: BusyPolicy | None, *,
                   discard_pending: bool = False) -> Sent:
        driver = self._driver(session_id)
        if not self.loop.busy(session_id):  # a queued message meets no checkpoint: none is left
            if discard_pending:
                driver.discard()
            elif (cp := await self._pending(session_id)) is not None:
                raise pending_refusal(session_id, cp)
        sent = driver.send(text, policy)
        if len(self._drivers) > 1024:  # keep drivers of sessions at work only
            for sid in [s for s in self._drivers if not self.loop.busy(s)]:
                del self._drivers[sid]
        return Sent(sent.turn_id, sent.action, sent.message_id, sent.state.value)

    async def steer(self, session_id: str, text: str) -> Taken:
        return _taken(self.loop.inject_steering(text, session_id))

    async def follow_up(self, session_id: str, text: str) -> Taken:
        if not self.loop.busy(session_id):  # refused like inject_follow_up: nothing to follow
            return _taken(self.loop.inject_follow_up(text, session_id))
        return _taken(self._driver(session_id).send(text, "follow_up"))

    async def queue(self, session_id: str) -> list[dict[str, Any]]:
        return list(redacted([{"message_id": m.message_id, "kind": m.kind, "text": m.text,
                               "state": m.state.value, "turn_id": m.turn_id,
                               "origin_id": m.origin_id}
                              for m in self.loop.queued_messages(session_id)], self.redact))

    async def revoke(self, message_id: str) -> bool:
        return self.loop.revoke_message(message_id)

    async def edit(self, message_id: str, text: str) -> bool:
        return self.loop.edit_message(message_id, text)

    async def interrupt(self, session_id: str, mode: InterruptModeName) -> bool:
        if mode == "graceful":
            return self.loop.interrupt_graceful(session_id)
        return self.loop.interrupt_hard(session_id)

    async def cancel(self, session_id: str, mode: CancelModeName) -> bool:
        handle = self.loop.cancel(session_id, CancelMode[mode.upper()])
        return handle is not None and handle.contributed

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool:
        return bool(self.loop.resolve_approval(request_id, approved, reason))

    async def pending_requests(self, session_id: str | None) -> list[dict[str, Any]]:
        pending = self.loop.pending_requests(session_id)
        return list(redacted([request_json(r) for r in pending], self.redact))

    async def answer_request(self, request_id: str, approved: bool | None, value: Any,
                             reason: str) -> str | None:
        """Answer an approval (``approved`` set) or a question (``value``); the id of the
        turn it resumed, if it did."""
        if approved is None:
            got = self.loop.answer(request_id, value)
        else:
            got = self.loop.resolve_approval(request_id, approved, reason)
            if got is False:
                raise UnknownRequestError(f"no open request {request_id!r}")
        return None if isinstance(got, bool) else got.turn_id

    async def _pending(self, session_id: str) -> Checkpoint | None:
        return await asyncio.to_thread(self.loop.checkpoint, session_id)

    async def resume(self, session_id: str) -> Sent:
        if self.loop.busy(session_id):
            raise SessionBusyError(f"session {session_id!r} is busy; a running turn cannot be "
                                   "resumed")
        handle = self._driver(session_id).resume()
        if handle is None:
            raise LookupError(f"session {session_id!r} has no pending turn")
        return Sent(handle.turn_id, "resumed", handle.message_id, handle.state.value)

    async def discard_pending(self, session_id: str) -> None:
        if not self._driver(session_id).discard():
            raise LookupError(f"session {session_id!r} has no pending turn")

    async def list_sessions(self) -> list[dict[str, Any]]:
        infos = await asyncio.to_thread(self.loop.store.list_sessions)
        listed = {i.session_id for i in infos}
        rows = [{"id": i.session_id, "title": i.title, "messages": i.message_count,
                 "updated": i.updated, "busy": self.loop.busy(i.session_id)} for i in infos]
        # A session whose first turn runs is not on disk yet, but it exists for its watchers.
        for sid in sorted(self._drivers):
            if sid not in listed and self.loop.busy(sid):
                rows.insert(0, {"id": sid, "title": "", "messages": 0, "updated": None,
                                "busy": True})
        return list(redacted(rows, self.redact))

    async def get_session(self, session_id: str) -> dict[str, Any]:
        cursor = self.hub.cursor(session_id)  # before reading history: see EventHub.cursor
        busy = self.loop.busy(session_id)
        exists = await asyncio.to_thread(self.loop.store.exists, session_id)
        pending = None if busy else await pending_or_error(self._pending(session_id))
        if not exists and not busy and pending is None:
            raise LookupError(f"no session {session_id!r}")
        messages = await asyncio.to_thread(self.loop.session_messages, session_id)
        return dict(redacted({"id": session_id, "messages": [message_json(m) for m in messages],
                              "busy": busy, "queued": list(self.loop.queued(session_id)),
                              "pending_turn": pending, "events_after": cursor,
                              "turns": await self._turns(session_id, len(messages))},
                             self.redact))

    async def _turns(self, session_id: str, count: int) -> list[dict[str, Any]]:
        """How each saved turn ended, where the store keeps it (JSONL's turn markers); the
        page shows these statuses after a reload. Empty when the store does not, or when its
        turns do not add up to the messages read (a turn saved in between)."""
        read = getattr(self.loop.store, "turns", None)
        if read is None:
            return []
        marks = await asyncio.to_thread(read, session_id)
        if marks and marks[-1].start >= count:
            return []
        return [{"turn_id": m.turn_id, "start": m.start, "status": m.status,
                 "iterations": m.iterations} for m in marks]

    async def delete_session(self, session_id: str) -> None:
        if self.loop.busy(session_id):
            raise SessionBusyError(f"session {session_id!r} is busy; interrupt it first")
        if not await asyncio.to_thread(self.loop.store.delete, session_id):
            raise LookupError(f"no session {session_id!r}")
        self.hub.forget(session_id)
        if self.on_delete is not None:
            await self.on_delete(session_id)

    def events(self, session_id: str, after: int | None) -> AsyncIterator[SSEItem]:
        return self.hub.stream(self.hub.attach(session_id, after))

    def sse(self, session_id: str, after: int | None) -> Feed:
        return self.hub.feed(self.hub.attach(session_id, after))

