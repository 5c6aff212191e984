"""``RedisClient``: post messages and control commands for any session, follow its events.

Any process can use it (a server front end, a script, a worker): it needs only the Redis URL.
A message for a session no worker holds is queued and a worker is woken; for a held session it
goes to the holder, which applies the busy policy exactly as one process would. Control
commands (steer, follow-up, interrupt, cancel, approval answers) go to the worker running the
turn and return its answer.

Every message has an id and a state (SPEC 10), whichever process holds it: a posted message's
id is its queue entry's, kept by the turn that takes it; a steer or a follow-up gets its id from
the worker whose turn took it. ``queue`` lists what waits (in the holder's turn and in the
session's Redis queue); ``revoke`` and ``edit`` find a message by its id alone.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import steerable.errors as errors
from steerable._core._parking import record_answer
from steerable._core._requests import RequestKind
from steerable._receipts import new_message_id
from steerable.errors import SessionBusyError, SteerableError
from steerable.scale._keys import Keys
from steerable.scale._protocol import POLICIES, Scripts, decode, encode
from steerable.storage._ids import check_session_id
from steerable.storage.redis_store import RedisSessionStore, RedisUnavailableError

__all__ = ["MessageAck", "RedisClient", "SendResult", "StreamedEvent", "WorkerUnavailableError",
           "connect"]

INBOX_MAXLEN = 100_000
MESSAGE_TTL = 7 * 86_400
"""Seconds a message's id finds its session (``revoke``/``edit`` by id alone)."""
_FIRST_WAIT = 0.2
"""Seconds a command waits for the holder's answer before it checks that the holder lives."""


class WorkerUnavailableError(SteerableError, ConnectionError):
    """The worker holding the session did not answer in time (it may have died: its sessions
    move to another worker when its lease ends). Try again shortly."""


@dataclass(frozen=True, slots=True)
class SendResult:
    """What happened to a posted message: ``action`` as in ``POST /v1/sessions/{id}/messages``
    (``started``, ``steered``, ``queued``, ``interrupted``, ``rolled_back``); ``turn_id`` when
    the turn it joined or started is known."""

    action: str
    turn_id: str | None = None
    message_id: str | None = None
    state: str | None = None
    """``queued`` (waiting in the session's queue or the running turn's), or the state the
    holder's receipt was in when it answered."""


@dataclass(frozen=True, slots=True)
class MessageAck:
    """The receipt of a steer or a follow-up given to a turn on another process: falsy when
    refused (no turn running, or it could not take it: ``detail`` says why)."""

    ok: bool
    message_id: str | None = None
    state: str = "rejected"
    detail: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, slots=True)
class StreamedEvent:
    """One event of a session as stored in its Redis stream: ``id`` is the stream entry id
    (use it as ``Last-Event-ID``), ``data`` the event's JSON form (as ``run --json``)."""

    id: str
    data: dict[str, Any]


def connect(url: str, *, timeout: float = 5.0, max_connections: int = 64,
            name: str | None = None) -> Any:
    """An asyncio redis client for ``url``, with a clear error when redis-py is missing.

    Its pool is bounded and blocking: a burst of commands waits for a free connection instead
    of opening hundreds (Redis refuses clients past ``maxclients``, which follows the open
    file limit). ``name``: the client name each connection gives itself (``CLIENT SETNAME``)."""
    try:
        import redis.asyncio as aioredis
    except ModuleNotFoundError:
        from steerable.errors import ConfigurationError

        raise ConfigurationError("Redis workers need redis-py: pip install 'steerable[redis]'") \
            from None
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout,
        socket_connect_timeout=timeout, health_check_interval=30, client_name=name)
    return aioredis.Redis.from_pool(pool)  # owns the pool: aclose() closes it


def unavailable_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.ConnectionError, redis.TimeoutError, OSError)


class RedisClient:
    """Talks to the workers of ``url`` (keys under ``prefix``). ``reply_timeout`` bounds how
    long a control command waits for the holding worker's answer."""

    def __init__(self, url: str, *, prefix: str = "steerable:", reply_timeout: float = 5.0,
                 client: Any = None) -> None:
        self.url = url
        self.keys = Keys(prefix)
        self.reply_timeout = reply_timeout
        self._redis = client if client is not None else connect(url)
        self._own = client is None
        self._scripts = Scripts(self._redis, self.keys)
        self._errors = unavailable_errors()
        self._store: Any = None
        """A store client for parked requests (made when one is first answered here)."""

    async def aclose(self) -> None:
        if self._own:
            await self._redis.aclose()
        if self._store is not None:
            self._store.close()

    def _down(self, exc: BaseException, what: str) -> RedisUnavailableError:
        return RedisUnavailableError(
            f"cannot {what}: Redis at {self.url} did not answer ({exc}); nothing was queued or "
            "started")

    # -- messages -----------------------------------------------------------------------------

    async def send(self, text: str, session_id: str, policy: str = "steer") -> SendResult:
        """Deliver a user message. Raises ``SessionBusyError`` for ``reject`` on a busy
        session, ``RedisUnavailableError`` when Redis is down (nothing is queued then)."""
        check_session_id(session_id)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("message text must be a non-empty str")
        if policy not in POLICIES:
            raise ValueError(f"unknown busy policy {policy!r}; use one of {', '.join(POLICIES)}")
        mid = new_message_id()
        entry = {"id": mid, "text": text, "policy": policy, "posted": time.time()}
        try:
            # Named before it is posted: once anyone can know the id, it finds its session.
            await self._redis.set(self.keys.message(mid), session_id, ex=MESSAGE_TTL)
            holder, waiting = await self._scripts.post(session_id, entry, maxlen=INBOX_MAXLEN)
            if holder is None:
                return SendResult("started" if waiting == 1 else "queued", None, mid, "queued")
            try:
                answer = await self._command(holder, "message", session_id, {"entry": entry})
            except WorkerUnavailableError:
                # The holder is gone: queue behind its turn, which the next holder resumes.
                await self._scripts.post(session_id, entry, maxlen=INBOX_MAXLEN, force=True)
                return SendResult("queued", None, mid, "queued")
            answered = answer.get("message_id")
            if answered and answered != mid:  # a receipt of the holder's turn (a steer)
                await self._redis.set(self.keys.message(answered), session_id,
                                      ex=MESSAGE_TTL)
        except self._errors as exc:
            raise self._down(exc, f"post to session {session_id!r}") from None
        if answer.get("action") == "rejected":
            raise SessionBusyError(f"session {session_id!r} is busy (turn {answer.get('turn_id')})")
        return SendResult(str(answer["action"]), answer.get("turn_id"),
                          answer.get("message_id", mid), answer.get("state", "queued"))

    async def resume(self, session_id: str) -> SendResult:
        """Continue the session's cancelled turn from its checkpoint, as its next turn (a
        dead worker's turn needs no request: it is resumed on its own)."""
        check_session_id(session_id)
        entry = {"id": secrets.token_hex(8), "text": "(resume)", "policy": "follow_up",
                 "resume": True, "posted": time.time()}
        try:
            _, waiting = await self._scripts.post(session_id, entry, maxlen=INBOX_MAXLEN,
                                                  force=True)
        except self._errors as exc:
            raise self._down(exc, f"resume session {session_id!r}") from None
        return SendResult("started" if waiting == 1 else "queued")

    # -- control ------------------------------------------------------------------------------

    async def steer(self, text: str, session_id: str) -> MessageAck:
        """Steer the session's running turn, on whichever worker runs it."""
        return await self._message("steer", text, session_id)

    async def follow_up(self, text: str, session_id: str) -> MessageAck:
        """A follow-up for the session's running turn (handed back when it ends)."""
        return await self._message("follow_up", text, session_id)

    async def _message(self, op: str, text: str, session_id: str) -> MessageAck:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("message text must be a non-empty str")
        answer = await self._control(op, session_id, {"text": text})
        if answer is None:
            return MessageAck(False, None, "rejected", "no turn is active")
        mid = answer.get("message_id")
        if mid:
            try:
                await self._redis.set(self.keys.message(mid), session_id, ex=MESSAGE_TTL)
            except self._errors as exc:
                raise self._down(exc, f"{op} session {session_id!r}") from None
        return MessageAck(bool(answer.get("ok")), mid, str(answer.get("state", "rejected")),
                          str(answer.get("detail", "")))

    async def interrupt(self, session_id: str, mode: str = "graceful") -> bool:
        if mode not in ("graceful", "hard"):
            raise ValueError(f"interrupt mode must be 'graceful' or 'hard', got {mode!r}")
        return await self._ok("interrupt", session_id, {"hard": mode == "hard"})

    async def cancel(self, session_id: str, mode: str = "immediate") -> bool:
        if mode not in ("immediate", "after_model", "after_tools"):
            raise ValueError(f"unknown cancel mode {mode!r}")
        return await self._ok("cancel", session_id, {"mode": mode})

    async def resolve_approval(self, request_id: str, approved: bool, reason: str = "") -> bool:
        """Answer an ``APPROVAL_REQUESTED`` raised on any worker, live or parked; False when
        no such request exists. A parked turn whose last request this answered resumes on
        whichever worker takes its session; a second answer raises ``RequestClosedError``."""
        try:
            return await self._answer("approval", request_id, approved, reason)
        except errors.UnknownRequestError:
            return False

    async def answer(self, request_id: str, value: Any) -> bool:
        """Answer a ``QUESTION_ASKED`` raised on any worker, live or parked (as
        ``AgentLoop.answer``: a ``RequestError`` says why an answer is refused)."""
        return await self._answer("question", request_id, value, "")

    async def _answer(self, kind: RequestKind, request_id: str, value: Any,
                      reason: str) -> bool:
        """To the worker that raised the request (it answers a live wait, or records a parked
        request's answer); else, when no worker has it any more, through the store here."""
        args = {"request_id": request_id, "approved": value, "reason": reason} \
            if kind == "approval" else {"request_id": request_id, "value": value}
        try:
            holder = await self._redis.get(self.keys.approval(request_id))
            if holder is not None:
                answer = await self._command(holder.decode(), "approval" if kind == "approval"
                                             else "answer", "", args)
                _raise_refusal(answer)
                if answer.get("ok"):
                    return True
        except WorkerUnavailableError:
            pass  # gone: a parked request is in the store; a live one died with its turn
        except self._errors as exc:
            raise self._down(exc, f"answer the {kind}") from None
        store = self._parked_store()
        cp = await asyncio.to_thread(record_answer, store, request_id, kind, value, reason)
        if cp is not None:
            await self.resume(cp.session_id)
        return True

    def _parked_store(self) -> Any:
        if self._store is None:
            self._store = RedisSessionStore(self.url, prefix=self.keys.prefix)
        return self._store

    async def holder(self, session_id: str) -> str | None:
        """The worker id holding the session's lease (running or about to run its turns)."""
        try:
            token = await self._redis.get(self.keys.lease(session_id))
        except self._errors as exc:
            raise self._down(exc, "read the session's lease") from None
        return None if token is None else token.decode().rsplit(":", 1)[0]

    async def _ok(self, op: str, session_id: str, args: dict[str, Any]) -> bool:
        answer = await self._control(op, session_id, args)
        return answer is not None and bool(answer.get("ok"))

    async def _control(self, op: str, session_id: str,
                       args: dict[str, Any]) -> dict[str, Any] | None:
        """The holder's answer to a command for the session's turn; None when no worker
        holds the session (no turn anywhere: like one process, nothing is kept for later)."""
        check_session_id(session_id)
        try:
            token = await self._redis.get(self.keys.lease(session_id))
            if token is None:
                return None
            answer = await self._command(token.decode(), op, session_id, args)
        except WorkerUnavailableError:
            raise  # a ConnectionError too, but Redis itself answered
        except self._errors as exc:
            raise self._down(exc, f"{op} session {session_id!r}") from None
        if "error" in answer:
            raise ValueError(str(answer["error"]))
        return answer

    # -- messages that wait -------------------------------------------------------------------

    async def queue(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages not yet delivered, in order: those the running turn holds
        (its input until its first LLM request, steering, follow-ups) as its worker lists
        them, then those waiting in the session's Redis queue. Each: ``message_id``, ``kind``,
        ``text``, ``state``, ``turn_id``, ``origin_id``."""
        check_session_id(session_id)
        try:
            held = await self._control("queue", session_id, {})
        except WorkerUnavailableError:
            held = None  # its turn is resumed elsewhere soon: what waits in Redis still shows
        listed = list(held["messages"]) if held is not None else []
        try:
            raw = await self._redis.lrange(self.keys.queue(session_id), 0, -1)
            if held is None:  # a dead holder's turn: its message waits for the next one
                inflight = await self._redis.get(self.keys.inflight(session_id))
                raw = [inflight, *raw] if inflight is not None else raw
        except self._errors as exc:
            raise self._down(exc, f"list the queue of session {session_id!r}") from None
        seen = {m["message_id"] for m in listed}
        for entry in map(decode, raw):
            if entry.get("resume") or entry["id"] in seen:
                continue
            seen.add(entry["id"])
            listed.append({"message_id": entry["id"], "kind": "send", "text": entry["text"],
                           "state": "queued", "turn_id": entry.get("turn_id"),
                           "origin_id": entry.get("origin")})
        return listed

    async def revoke(self, message_id: str) -> bool:
        """Withdraw a message while it waits (in the session's queue, or in the running
        turn's steering or follow-ups); False once a turn took it."""
        return await self._change(message_id, None, "revoke")

    async def edit(self, message_id: str, text: str) -> bool:
        """Change a waiting message's text (it keeps its id and place); False once a turn
        took it."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("message text must be a non-empty str")
        return await self._change(message_id, text, "edit")

    async def _change(self, message_id: str, text: str | None, op: str) -> bool:
        if not isinstance(message_id, str) or not message_id:
            raise ValueError("message_id must be a non-empty str")
        try:
            sid = await self._redis.get(self.keys.message(message_id))
            if sid is None:
                return False
            session_id = sid.decode()
            if await self._scripts.change(session_id, message_id, text):
                return True
        except self._errors as exc:
            raise self._down(exc, f"{op} message {message_id!r}") from None
        args = {"message_id": message_id} | ({} if text is None else {"text": text})
        answer = await self._control(op, session_id, args)
        return answer is not None and bool(answer.get("ok"))

    async def _command(self, token: str, op: str, session_id: str,
                       args: dict[str, Any]) -> dict[str, Any]:
        worker = token.rsplit(":", 1)[0]
        reply = self.keys.reply(secrets.token_hex(16))
        command = {"op": op, "session": session_id, "args": args, "reply": reply}
        await self._redis.xadd(self.keys.control(worker), {"c": encode(command)},
                               maxlen=10_000, approximate=True)
        deadline = time.monotonic() + self.reply_timeout
        wait = _FIRST_WAIT  # a live worker answers within milliseconds
        while (left := deadline - time.monotonic()) > 0:
            got = await self._redis.blpop([reply], timeout=min(wait, left))
            if got is not None:
                return decode(got[1])
            if not await self._alive(worker):
                raise WorkerUnavailableError(
                    f"worker {worker} holding session {session_id!r} is gone (its connections "
                    "to Redis closed)")
            wait = 1.0
        raise WorkerUnavailableError(
            f"worker {worker} holding session {session_id!r} did not answer within "
            f"{self.reply_timeout:g} s")

    async def _alive(self, worker: str) -> bool:
        """Whether ``worker`` still has a connection to Redis: a killed process's sockets are
        closed by its kernel at once, so a dead holder is known without waiting for its lease
        (a stopped process, or one behind a cut network, still looks alive: the caller's
        ``reply_timeout`` bounds that case)."""
        import redis

        try:
            clients = await self._redis.client_list(_type="normal")
        except redis.ResponseError:
            return True  # CLIENT LIST not permitted (an ACL): wait for the timeout instead
        name = self.keys.client_name(worker)
        return any(c.get("name") == name for c in clients)

    # -- events -------------------------------------------------------------------------------

    async def events(self, session_id: str, last_id: str | None = None, *,
                     block: float = 1.0) -> AsyncIterator[StreamedEvent]:
        """Follow the session's events, whichever worker runs its turns, forever (close the
        iterator to stop). ``last_id`` (a ``StreamedEvent.id``, the SSE ``Last-Event-ID``)
        resumes after that event; None starts with what the capped stream still holds."""
        check_session_id(session_id)
        key = self.keys.events(session_id)
        cursor = last_id or "0-0"
        while True:
            try:
                got = await self._redis.xread({key: cursor}, count=256,
                                              block=int(block * 1000))
            except self._errors as exc:
                raise self._down(exc, f"read the events of session {session_id!r}") from None
            for _, entries in got or ():
                for entry_id, fields in entries:
                    cursor = entry_id.decode()
                    yield StreamedEvent(cursor, decode(fields[b"e"]))
            await asyncio.sleep(0)


def _raise_refusal(answer: dict[str, Any]) -> None:
    """A worker refused an answer: raise it here as the error the worker raised."""
    if "error" not in answer:
        return
    cls = getattr(errors, str(answer.get("type", "")), None)
    if isinstance(cls, type) and issubclass(cls, errors.RequestError):
        raise cls(str(answer["error"]))
    raise ValueError(str(answer["error"]))
