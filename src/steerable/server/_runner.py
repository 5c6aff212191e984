"""The seam between the HTTP layer and whatever runs the sessions.

``SessionRunner`` is everything the routes call: send a message, steer, interrupt, cancel,
answer an approval, read and delete sessions, follow a session's events. ``LocalRunner`` is
the one-process implementation over an ``AgentLoop`` and its store; a runner that spreads
sessions over several processes (a Redis bus) implements the same protocol and the routes do
not change. Runner methods raise ``SessionBusyError`` (409), ``LookupError`` (404) or
``ValueError`` (400); the routes turn those into status codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from steerable._core._cancel import CancelMode
from steerable._lanes import BusyPolicy
from steerable._loop import AgentLoop
from steerable._messages import Message
from steerable._secrets import redacted
from steerable._session_driver import SessionDriver
from steerable.errors import SessionBusyError
from steerable.server._hub import EventHub, SSEItem

__all__ = ["CancelModeName", "InterruptModeName", "LocalRunner", "Sent", "SessionRunner"]

InterruptModeName = Literal["graceful", "hard"]
CancelModeName = Literal["immediate", "after_model", "after_tools"]


@dataclass(frozen=True, slots=True)
class Sent:
    turn_id: str | None
    action: str


class SessionRunner(Protocol):
    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None) -> Sent: ...

    async def steer(self, session_id: str, text: str) -> bool: ...

    async def follow_up(self, session_id: str, text: str) -> bool: ...

    async def interrupt(self, session_id: str, mode: InterruptModeName) -> bool: ...

    async def cancel(self, session_id: str, mode: CancelModeName) -> bool: ...

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool: ...

    async def list_sessions(self) -> list[dict[str, Any]]: ...

    async def get_session(self, session_id: str) -> dict[str, Any]: ...

    async def delete_session(self, session_id: str) -> None: ...

    def events(self, session_id: str, after: int | None) -> AsyncIterator[SSEItem]: ...


def message_json(message: Message) -> dict[str, Any]:
    """A message as the API shows it (before redaction, which the runner applies to the whole
    answer)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                             for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.is_error:
        out["is_error"] = True
    return out


class LocalRunner:
    """Sessions run by one ``AgentLoop`` in this process; messages go through
    ``SessionDriver.send`` (the same path as the CLI), events through an ``EventHub``."""

    def __init__(self, loop: AgentLoop, redact: Callable[[str], str] = lambda text: text, *,
                 replay: int = 2048) -> None:
        self.loop = loop
        self.redact = redact
        self.hub = EventHub(redact, replay=replay, client_buffer=max(4096, replay))
        self._drivers: dict[str, SessionDriver] = {}
        self._pump: asyncio.Task[None] | None = None

    async def start(self) -> None:
        sub = self.loop.subscribe(buffer=1 << 16)
        self._pump = asyncio.get_running_loop().create_task(self.hub.pump(sub))

    async def aclose(self) -> None:
        await self.loop.aclose()  # ends the subscription, so the pump ends too
        if self._pump is not None:
            await self._pump

    def _driver(self, session_id: str) -> SessionDriver:
        driver = self._drivers.get(session_id)
        if driver is None:
            driver = self._drivers[session_id] = SessionDriver(self.loop, session_id)
        return driver

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None) -> Sent:
        sent = self._driver(session_id).send(text, policy)
        if len(self._drivers) > 1024:  # keep drivers of sessions at work only
            for sid in [s for s in self._drivers if not self.loop.busy(s)]:
                del self._drivers[sid]
        return Sent(sent.turn_id, sent.action)

    async def steer(self, session_id: str, text: str) -> bool:
        return bool(self.loop.inject_steering(text, session_id))

    async def follow_up(self, session_id: str, text: str) -> bool:
        if not self.loop.busy(session_id):
            return False  # like inject_follow_up: nothing to follow
        self.loop.send(text, session_id, "follow_up")
        return True

    async def interrupt(self, session_id: str, mode: InterruptModeName) -> bool:
        if mode == "graceful":
            return self.loop.interrupt_graceful(session_id)
        return self.loop.interrupt_hard(session_id)

    async def cancel(self, session_id: str, mode: CancelModeName) -> bool:
        handle = self.loop.cancel(session_id, CancelMode[mode.upper()])
        return handle is not None and handle.contributed

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool:
        return self.loop.resolve_approval(request_id, approved, reason)

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
        if not exists and not busy:
            raise LookupError(f"no session {session_id!r}")
        messages = await asyncio.to_thread(self.loop.session_messages, session_id)
        return dict(redacted({"id": session_id, "messages": [message_json(m) for m in messages],
                              "busy": busy, "queued": list(self.loop.queued(session_id)),
                              "events_after": cursor}, self.redact))

    async def delete_session(self, session_id: str) -> None:
        if self.loop.busy(session_id):
            raise SessionBusyError(f"session {session_id!r} is busy; interrupt it first")
        if not await asyncio.to_thread(self.loop.store.delete, session_id):
            raise LookupError(f"no session {session_id!r}")
        self.hub.forget(session_id)

    def events(self, session_id: str, after: int | None) -> AsyncIterator[SSEItem]:
        return self.hub.stream(self.hub.attach(session_id, after))

