"""``RedisWorker``: one process among several that share sessions through Redis.

Each worker runs an ``AgentLoop`` and these tasks, all owned by ``run()``:

- inbox: reads "session has work" notices from the ``inbox`` stream as one consumer of the
  ``workers`` group, and tries to take the session's lease;
- sessions: one runner per held session runs its queued messages in order, one turn at a time;
- control: executes the commands other processes send to this worker (steer, interrupt...);
- renew: keeps this worker's leases alive, and stops a turn whose lease was lost;
- sweep: takes over the sessions of dead workers (leases past their deadline) and notices a
  dead consumer never acknowledged;
- events: copies every event of the loop into its session's capped stream.

Redis being down never crashes a worker: each task logs one line, retries with backoff, and
carries on when Redis answers again (re-creating the consumer group after a restart).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from steerable._core._agent import BaseAgent
from steerable._core._session import SessionStore
from steerable._events import TurnStatus
from steerable._receipts import new_message_id
from steerable._secrets import Redactor
from steerable.drivers._commands import StartTurn
from steerable.drivers._handle import TurnHandle
from steerable.drivers._loop import AgentLoop
from steerable.scale._client import MESSAGE_TTL, RedisClient, connect, unavailable_errors
from steerable.scale._control import ControlHandler
from steerable.scale._events import EventPublisher
from steerable.scale._fence import fence
from steerable.scale._keys import Keys
from steerable.scale._lease import LeaseScripts, LeaseTiming
from steerable.scale._protocol import Scripts
from steerable.storage.redis_store import RedisSessionStore, RedisUnavailableError

__all__ = ["RedisWorker", "WorkerStatistics"]

log = logging.getLogger("steerable.scale")


@dataclass(frozen=True, slots=True)
class WorkerStatistics:
    worker_id: str
    sessions: tuple[str, ...]
    """Sessions this worker holds the lease of."""
    running: tuple[str, ...]
    """Sessions with a turn running here now."""


class _NothingToResume(Exception):
    """A resume request for a session with no checkpoint: nothing to run."""


class _LeaseLost(Exception):
    """The session's lease moved to another worker: this worker stops touching it."""


class RedisWorker:
    """A worker of the group at ``url``: runs turns of any session it takes, with ``agent``
    (or a function that builds the ``AgentLoop`` around the store it is given).

    ``store`` is the shared session store (default: a ``RedisSessionStore`` on the same Redis);
    every write to it is fenced by this worker's lease. ``lease`` sets the lease timing,
    ``max_sessions`` how many sessions this worker runs at once. Each session's events stream
    keeps about ``events_maxlen`` events (the replay window of a reconnecting follower) and
    expires ``events_ttl`` seconds after its last event; ``redact`` blanks secrets in them
    (default: a ``Redactor()``: the environment's secrets and credential shapes). Other
    keywords go to the ``AgentLoop`` (``limits``, ``timeouts``, ``permissions``, ``record_events``); the loop is
    ``worker.loop``, the client for posting and following events is ``worker.client``.
    """

    def __init__(self, agent: BaseAgent | Callable[[SessionStore], AgentLoop], url: str, *, store: SessionStore | None = None,
                 prefix: str = "steerable:", lease: LeaseTiming | None = None,
                 max_sessions: int = 64, worker_id: str | None = None,
                 events_maxlen: int = 2_000, events_ttl: int = 3_600,
                 redact: Callable[[str], str] | None = None, **loop_options: Any) -> None:
        import redis

        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.url = url
        self.keys = Keys(prefix)
        self.timing = lease or LeaseTiming()
        self.max_sessions = max_sessions
        self.worker_id = worker_id or (f"{socket.gethostname()}-{os.getpid()}-"
                                       f"{secrets.token_hex(3)}")
        self._sync = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        inner = store if store is not None else RedisSessionStore(client=self._sync, prefix=prefix)
        self.store = fence(inner, self.keys, self._sync)
        if isinstance(agent, BaseAgent):
            self.loop = AgentLoop(agent, store=self.store, **loop_options)
        else:  # a factory: builds the loop around the fenced store (``steerable serve``)
            self.loop = agent(self.store)
        self._redis = connect(url, name=self.keys.client_name(self.worker_id))
        self.client = RedisClient(url, prefix=prefix, client=self._redis)
        self.leases = LeaseScripts(self._redis, self.keys, self.timing)
        self.scripts = Scripts(self._redis, self.keys)
        self.events_maxlen = events_maxlen
        self.events_ttl = events_ttl
        self.redact: Callable[[str], str] = redact if redact is not None else Redactor()
        """Applied to every string of an event before it goes to Redis."""
        self.running: dict[str, TurnHandle] = {}
        """The turn each held session runs now (read by the control handler)."""
        self.turn_tokens: dict[str, str] = {}
        """Top-level turn id -> the lease token it runs under (fences its events)."""
        self._published: dict[str, asyncio.Event] = {}
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._woken: set[str] = set()
        self._errors = unavailable_errors()
        self._stop: asyncio.Event | None = None
        self._tg: asyncio.TaskGroup | None = None
        # A parked turn whose last answer reaches this worker resumes where the session's
        # lease is: through the session's queue, like any message, never on this loop directly.
        self.loop._turns.answers.resume = self._post_resume
        self._capacity = asyncio.Condition()
        self.ready = asyncio.Event()
        """Set once the worker reads its inbox (tests and the server wait for it)."""

    @property
    def tokens(self) -> dict[str, str]:
        return self.store.tokens

    # -- life cycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Work until ``stop()``. Running turns are then aborted and their sessions handed to
        another worker at once (their messages stay queued: nothing is lost)."""
        self._stop = asyncio.Event()
        publisher = EventPublisher(self)
        control = ControlHandler(self)
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                background = [tg.create_task(self._forever("inbox", self._read_inbox)),
                              tg.create_task(self._forever("control", control.run)),
                              tg.create_task(self._forever("sweep", self._sweep)),
                              tg.create_task(self._forever("renew", self._renew))]
                events = tg.create_task(publisher.run())
                await self._stop.wait()
                background[0].cancel()
                background[2].cancel()
                await self._hand_over()
                for task in background:
                    task.cancel()
                publisher.close()
                await events
        finally:
            self._tg = None
            await self.loop.aclose()
            await self._redis.aclose()
            self._sync.close()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _post_resume(self, session_id: str) -> bool:
        """Queue the resume of a parked turn (its answers are in): the worker that takes the
        session resumes it."""
        if self._tg is None:
            raise RuntimeError("this worker is not running; the turn stays parked until "
                               "another process resumes it")
        self._tg.create_task(self.client.resume(session_id))
        return True

    async def _hand_over(self) -> None:
        for session_id in list(self.running):
            self.loop.interrupt_hard(session_id)
        if self._runners:
            _, late = await asyncio.wait(list(self._runners.values()), timeout=self.timing.ttl)
            for task in late:  # stuck on a Redis that is down: their leases simply expire
                task.cancel()

    async def _forever(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run ``body`` again after each Redis outage, with backoff; one log line per outage."""
        delay, down = 0.05, False
        while True:
            try:
                await body()
                return
            except self._errors as exc:
                if not down:
                    log.warning("worker %s: Redis at %s is unreachable (%s: %s); retrying",
                                self.worker_id, self.url, name, exc)
                down = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    # -- taking sessions ----------------------------------------------------------------------

    async def _ensure_group(self) -> None:
        import redis

        try:
            await self._redis.xgroup_create(self.keys.inbox, self.keys.group, id="0",
                                            mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _read_inbox(self) -> None:
        import redis

        await self._ensure_group()
        self.ready.set()
        while True:
            async with self._capacity:
                await self._capacity.wait_for(lambda: len(self._runners) < self.max_sessions)
            try:
                got = await self._redis.xreadgroup(self.keys.group, self.worker_id,
                                                   {self.keys.inbox: ">"}, count=16, block=1000)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                await self._ensure_group()  # Redis restarted empty
                continue
            for _, entries in got or ():
                for entry_id, fields in entries:
                    await self.wake(fields[b"session"].decode())
                    await self._redis.xack(self.keys.inbox, self.keys.group, entry_id)

    async def wake(self, session_id: str) -> bool:
        """Take the session if no worker holds it, and start running its queue."""
        if session_id in self._runners:
            # Its runner may be letting go right now: it looks at this mark after releasing.
            self._woken.add(session_id)
            return True
        if self._stopping:
            return False
        token = await self.leases.acquire(session_id, self.worker_id)
        if token is None:
            return False  # its holder runs the queue, and re-checks it when letting go
        self.tokens[session_id] = token
        assert self._tg is not None
        self._runners[session_id] = self._tg.create_task(self._serve(session_id))
        return True

    async def _sweep(self) -> None:
        """Sessions whose lease deadline passed (their worker died), and inbox notices that a
        dead consumer read but never acknowledged."""
        import redis

        while True:
            await asyncio.sleep(self.timing.sweep_every)
            now = int(time.time() * 1000)
            late = await self._redis.zrangebyscore(self.keys.active, "-inf", now, start=0, num=64)
            for raw in late:
                await self.wake(raw.decode())
            try:
                _, claimed, *_ = await self._redis.xautoclaim(
                    self.keys.inbox, self.keys.group, self.worker_id,
                    min_idle_time=self.timing.ttl_ms, start_id="0-0", count=64)
            except redis.ResponseError:
                await self._ensure_group()
                continue
            for entry_id, fields in claimed:
                if fields:
                    await self.wake(fields[b"session"].decode())
                await self._redis.xack(self.keys.inbox, self.keys.group, entry_id)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.timing.renew_every)
            await self._renew_once()

    async def _renew_once(self) -> None:
        for session_id, token in list(self.tokens.items()):
            if await self.leases.renew(session_id, token):
                continue
            # The runner may have let go (and taken the session again, with a new token)
            # while this renewal was on its way: only a token still in use was lost.
            if self.tokens.get(session_id) != token:
                continue
            log.warning("worker %s lost the lease of session %r; stopping its turn",
                        self.worker_id, session_id)
            del self.tokens[session_id]
            if session_id in self.running:
                self.loop.interrupt_hard(session_id)

    # -- running a session --------------------------------------------------------------------

    async def _serve(self, session_id: str) -> None:
        try:
            while True:
                token = self.tokens.get(session_id)
                if token is None:
                    return
                taken = await self._retry(partial(self.scripts.take, session_id, token))
                if taken is None:
                    if not await self._let_go(session_id, token):
                        return
                    continue
                resumed, entry = taken
                if not await self._run_entry(session_id, token, entry, resumed=resumed):
                    return
        except _LeaseLost:
            self.tokens.pop(session_id, None)
        finally:
            self.running.pop(session_id, None)
            self._runners.pop(session_id, None)
            self._woken.discard(session_id)
            async with self._capacity:
                self._capacity.notify_all()

    async def _let_go(self, session_id: str, token: str) -> bool:
        """Release the lease; True when work arrived meanwhile and the lease was taken again."""
        self.tokens.pop(session_id, None)
        self._woken.discard(session_id)
        waiting = await self._retry(lambda: self.leases.release(session_id, token))
        # Work queued before the release is counted in ``waiting``; a notice that came while
        # the release was on its way found this runner still registered and left the mark.
        if not (waiting or session_id in self._woken) or self._stopping:
            return False
        self._woken.discard(session_id)
        again = await self._retry(lambda: self.leases.acquire(session_id, self.worker_id))
        if again is None:
            return False
        self.tokens[session_id] = again
        return True

    @property
    def _stopping(self) -> bool:
        return self._stop is None or self._stop.is_set()

    async def _run_entry(self, session_id: str, token: str, entry: dict[str, Any], *,
                         resumed: bool) -> bool:
        """Run one queued message as a turn; False when the session must be left alone."""
        turn_id = entry.get("turn_id")
        if resumed and turn_id and await asyncio.to_thread(self.store.has_turn, session_id,
                                                           str(turn_id)):
            # The dead worker saved this turn but died before clearing it: never run it twice.
            await self._retry(lambda: self.scripts.finish(session_id, token, []))
            return True
        try:
            handle = self._start(session_id, entry, resumed=resumed)
        except _NothingToResume:
            await self._retry(lambda: self.scripts.finish(session_id, token, []))
            return True
        self.running[session_id] = handle
        self.turn_tokens[handle.turn_id] = token  # before its first event is published
        self._published[handle.turn_id] = asyncio.Event()
        await self._retry(lambda: self.scripts.mark(session_id, token,
                                                    {**entry, "turn_id": handle.turn_id}))
        result = await handle
        self.running.pop(session_id, None)
        await self._wait_published(handle.turn_id)
        if self._stopping and result.status is TurnStatus.ABORTED:
            await self._hand_session_over(session_id, token)
            return False
        if self.tokens.get(session_id) != token:
            return False  # lost meanwhile: the new holder runs the message again
        if result.status is TurnStatus.ERROR and isinstance(result.error, RedisUnavailableError):
            return True  # nothing was saved: the message is still in flight, run it again
        # Each a new message (SPEC 10) linked by its origin to the one the turn handed back.
        ids = result.follow_up_ids or ("",) * len(result.follow_ups)
        nexts = [self._entry(text, "follow_up", origin)
                 for text, origin in zip(result.follow_ups, ids, strict=True)]
        nexts += [self._entry(item.text, "follow_up", item.message_id)
                  for item in result.unprocessed]
        for entry in nexts:  # found by its id like any other
            await self._retry(partial(self._redis.set, self.keys.message(entry["id"]),
                                      session_id, ex=MESSAGE_TTL))
        await self._retry(lambda: self.scripts.finish(session_id, token, nexts))
        return True

    def turn_published(self, turn_id: str) -> None:
        """Called by the publisher once the turn's TURN_END is in its stream (or dropped)."""
        self.turn_tokens.pop(turn_id, None)
        published = self._published.pop(turn_id, None)
        if published is not None:
            published.set()

    async def _wait_published(self, turn_id: str) -> None:
        """Let the turn's events reach its stream before the session can be let go: the next
        acquisition bumps the fence, after which they would be refused. Bounded by the lease
        time (a TURN_END lost to a full subscription buffer must not hold the session)."""
        published = self._published.get(turn_id)
        if published is None:
            return
        try:
            await asyncio.wait_for(published.wait(), self.timing.ttl)
        except TimeoutError:
            self.turn_published(turn_id)

    def _start(self, session_id: str, entry: dict[str, Any], *, resumed: bool) -> TurnHandle:
        """Resume the turn of a dead worker (or a cancelled turn, on request) from its
        checkpoint; otherwise start the message's turn. A new message drops the checkpoint a
        cancelled turn left: the user moved on (``RedisClient.resume`` continues it instead)."""
        if resumed or entry.get("resume"):
            try:
                handle = self.loop.resume(session_id)
            except ValueError as exc:  # CheckpointError: another agent, or unreadable
                log.warning("worker %s cannot resume session %r (%s); running its message "
                            "again from the start", self.worker_id, session_id, exc)
                handle = None
            if handle is not None:
                return handle
            if entry.get("resume"):
                raise _NothingToResume()
        # The message keeps its id: the turn's input is the message the queue held.
        started: TurnHandle = self.loop.submit(StartTurn(
            str(entry["text"]), session_id, discard_checkpoint=True,
            message_id=str(entry["id"]), origin_id=entry.get("origin")))
        return started

    async def _hand_session_over(self, session_id: str, token: str) -> None:
        """On stop: give the lease up with the message still in flight and wake another
        worker, which runs it again at once instead of after the lease time."""
        self.tokens.pop(session_id, None)
        try:
            await self.leases.release(session_id, token)
            await self._redis.xadd(self.keys.inbox, {"session": session_id})
        except self._errors:
            pass  # Redis is down: the lease expires on its own and a sweeper takes it over

    @staticmethod
    def _entry(text: str, policy: str, origin: str = "") -> dict[str, Any]:
        entry = {"id": new_message_id(), "text": text, "policy": policy, "posted": time.time()}
        return {**entry, "origin": origin} if origin else entry

    async def _retry(self, step: Callable[[], Awaitable[Any]]) -> Any:
        """Run a Redis step of a session's runner, waiting out Redis outages; a lease found
        in other hands ends the runner."""
        import redis

        delay = 0.05
        while True:
            try:
                return await step()
            except redis.ResponseError as exc:
                if "LEASE_LOST" in str(exc):
                    raise _LeaseLost() from None
                raise
            except self._errors:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def statistics(self) -> WorkerStatistics:
        return WorkerStatistics(self.worker_id, tuple(sorted(self._runners)),
                                tuple(sorted(self.running)))

    def __repr__(self) -> str:
        return f"<RedisWorker {self.worker_id} sessions={len(self._runners)}>"

