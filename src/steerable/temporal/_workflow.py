"""``SessionWorkflow``: one session as one Temporal workflow, the steerable engine inside it.

The workflow runs an ordinary ``AgentLoop`` over the worker's agent whose provider and tools
are activities (``_proxies``): the engine's own turn loop, checkpoints, steering, interrupts,
cancel modes, busy policies and approvals decide what happens, and Temporal makes it durable.
Workflow code must be deterministic; the engine is plain asyncio on Temporal's deterministic
event loop, and the few things that are not (random ids) come from replayable sources
(``steerable._ids``: an update's own stream, fixed by the run's and the update's ids, else the
workflow's seeded random), so a worker that replays the session after a crash makes the same
ids, events and decisions as the one that died.

Every inbound action is an update whose answer is the message's receipt (id and state) or the
control's outcome; approvals and tools' questions wait in the workflow for as long as it
takes (no timer denies them; the workflow costs nothing while it waits). Events go to the
session's Redis stream (``_eventlog``); a summary of the session (title, size, busy, open
requests) to the workflow's memo, for listings by visibility query. An idle session whose
history grew long continues as new, carrying its conversation; one idle for ``idle_close``
seconds completes with its state, which the next ``send`` starts a new run from. Hooks run
here or in activities (``_hooks``); sub-turns and composites are the engine's own.

The workflow is not sandboxed: the engine is passed through whole, and its determinism rests
on the rules above (no wall clock, threads or I/O decide anything) rather than on the
sandbox's import checks. The worker runs workflow code on one thread (the engine checks which
thread calls it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from steerable import (
    AgentLoop,
    BusyPolicy,
    CancelMode,
    Event,
    EventKind,
    HumanApprover,
    Permissions,
    Timeouts,
    event_to_dict,
)
from steerable._ids import id_source
from steerable.storage._records import session_title
from steerable.temporal._codec import messages_from_json, messages_to_json
from steerable.temporal._eventlog import Publisher
from steerable.temporal._homes import Homes
from steerable.temporal._hooks import WorkerHook, inline_hook, remote_hook
from steerable.temporal._proxies import CallOptions, remote_agent
from steerable.temporal._requests import OpenRequests

__all__ = ["MEMO", "WORKFLOW", "SessionStart", "SessionWorkflow", "WorkerConfig", "update_ids",
           "workflow_thread"]

WORKFLOW = "steerable.session"
MEMO = "steerable"
"""The memo key of a session's summary (title, messages, busy, closed, open requests)."""
_FOREVER = 100 * 365 * 24 * 3600.0
"""An approval waits this long (a durable timer): in effect, until it is answered."""
_LIVE_KINDS = frozenset({EventKind.LLM_DELTA, EventKind.TOOL_CALL_DELTA, EventKind.LLM_RETRY,
                         EventKind.TOOL_EXEC_PROGRESS, EventKind.PLAN_UPDATED})
"""Published by the activities as they happen; the workflow's copies are left out."""
_KEEP_RESULTS = 256
_CANCEL_MODES = {"immediate": CancelMode.IMMEDIATE, "after_model": CancelMode.AFTER_MODEL,
                 "after_tools": CancelMode.AFTER_TOOLS}


@dataclass
class WorkerConfig:
    """What the workflows of one task queue run with (the same on every worker of it)."""

    agent: Any
    publisher: Publisher | None = None
    permissions: Permissions | None = None
    options: CallOptions = field(default_factory=CallOptions)
    max_history: int = 20_000
    """Events in the workflow's history past which an idle session continues as new."""
    idle_close: float | None = 3600.0
    """Seconds idle after which the session's workflow completes, its state (the conversation,
    the event numbering, the last turns' results) as its result: the next ``send`` starts a
    new run from it. None: never."""
    human_approval: bool = False
    """Calls the permissions ask about wait for a person (``resolve_approval``); without it
    they run, as in an ``AgentLoop`` with no approver."""
    hooks: tuple[WorkerHook, ...] = ()


@dataclass
class SessionStart:
    session_id: str
    busy_policy: str = "steer"
    history: list[dict[str, Any]] = field(default_factory=list)
    seq_base: int = 0
    """The last event number of the runs before this one (continue-as-new keeps counting)."""
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    """How the last turns ended, by message id (``result`` answers across runs)."""


def update_ids(run_id: str, update_id: str) -> Callable[[int], bytes]:
    """A stream of random bytes fixed by a run's and an update's ids (SHA-256 in counter
    mode): the same on every replay, in every process."""
    counter = itertools.count()
    pending = bytearray()

    def take(n: int) -> bytes:
        while len(pending) < n:
            block = f"{run_id}/{update_id}/{next(counter)}".encode()
            pending.extend(hashlib.sha256(block).digest())
        out = bytes(pending[:n])
        del pending[:n]
        return out

    return take


def _turn_json(result: Any) -> dict[str, Any]:
    return {"turn_id": result.turn_id, "status": result.status.value, "text": result.text,
            "iterations": result.iterations, "follow_ups": list(result.follow_ups),
            "unprocessed": [r.message_id for r in result.unprocessed],
            "error": None if result.error is None
            else f"{type(result.error).__name__}: {result.error}"}


def _receipt_json(receipt: Any, **more: Any) -> dict[str, Any]:
    return {"message_id": receipt.message_id, "state": receipt.state.value,
            "accepted": bool(receipt), "turn_id": receipt.turn_id, **more}


_thread = threading.local()


def _bind_thread(config: WorkerConfig) -> None:
    _thread.config = config


def workflow_thread(config: WorkerConfig, name: str) -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that runs a worker's (or a replayer's) workflow code, bound to its
    ``config``: the workflow finds its agent there, so a replay runs exactly what the worker
    it was made for runs, and two workers in one process keep their own."""
    return concurrent.futures.ThreadPoolExecutor(1, name, initializer=_bind_thread,
                                                 initargs=(config,))


@workflow.defn(name=WORKFLOW, sandboxed=False)
class SessionWorkflow:
    @workflow.init
    def __init__(self, start: SessionStart) -> None:
        config: WorkerConfig | None = getattr(_thread, "config", None)
        if config is None:  # a worker made without ``workflow_thread``: fix it and retry
            raise RuntimeError("SessionWorkflow runs only on a TemporalWorker's workflow thread")
        self.config = config
        self.session_id = start.session_id
        self.seq_base = start.seq_base
        self.last_seq = 0
        rng = workflow.random()
        self._ids: Callable[[int], bytes] = lambda n: rng.getrandbits(8 * n).to_bytes(n, "big")
        homes = Homes()  # where the turns' calls ran (``_homes``)
        agent, provider = remote_agent(config.agent, lambda: self.seq_base, config.options,
                                       homes)
        self.loop = AgentLoop(
            agent, busy_policy=cast(BusyPolicy, start.busy_policy), checkpoints=False,
            permissions=config.permissions, record_events=None,
            # Timers here are durable: an approval waits for its answer, and the model's and
            # the tools' silence is watched by their activities' heartbeats instead.
            timeouts=Timeouts(approval=_FOREVER, llm_idle=None))
        if config.human_approval:
            self.loop.register_hook(HumanApprover())
        remote = 0
        for spec in config.hooks:
            if spec.in_workflow:
                hook = inline_hook(spec.make())
            else:
                hook = remote_hook(remote, spec, config.options, homes)
                remote += 1
            self.loop.register_hook(hook, spec.priority, spec.timeout)
        provider.bind(self.loop.subscribe([EventKind.LLM_REQUEST], buffer=1024))
        self._events = self.loop.subscribe(buffer=1 << 20)
        if start.history:
            self.loop.store.replace(self.session_id, messages_from_json(start.history))
        self._closing = False
        self._waiting: dict[str, Any] = {}
        """Message id -> the TurnHandle or QueuedTurn of the turn that takes it."""
        self._results: dict[str, dict[str, Any]] = dict(start.results)
        """Message id -> how the turn that took it ended (the last ``_KEEP_RESULTS``)."""
        self.requests = OpenRequests(self.session_id)
        self._memo: dict[str, Any] | None = None
        self._settling: set[asyncio.Task[None]] = set()

    @contextmanager
    def _replayable(self) -> Iterator[None]:
        with id_source(self._ids):
            yield

    @contextmanager
    def _handling(self) -> Iterator[None]:
        """An update's body: replayable ids, and its errors answered to the caller (an
        ``ApplicationError`` fails the update; any other exception would fail the workflow
        task, and Temporal would retry it forever).

        The ids an update makes (its message's, and those of the turn it starts, which keeps
        the source) come from a stream of its own, derived from the run's and the update's ids
        (both in the history), not from the workflow's one random stream: what the update
        answered (a message id a caller holds) then cannot change on a replay that drew from
        that stream in another order (seen under load: a ``result`` for the id ``send``
        answered found no such message on a cold worker)."""
        update = workflow.current_update_info()
        source = self._ids if update is None else update_ids(workflow.info().run_id, update.id)
        with id_source(source):
            try:
                yield
            except ApplicationError:
                raise
            except Exception as exc:
                raise ApplicationError(str(exc), type=type(exc).__name__) from None

    # -- the run ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: SessionStart) -> SessionStart | None:
        """Until the session is closed (None), idle for ``idle_close`` seconds (the state a
        later ``send`` starts the next run from), or idle with a long history (continued as
        new at once, with the same state)."""
        with self._replayable():
            pump = asyncio.create_task(self._pump())
            memo = asyncio.create_task(self._keep_memo())
            expired = await self._wait_for_the_end()
            self._publish(self._events.drain_nowait())
            pump.cancel()
            memo.cancel()
            self._remember(closed=self._closing)
            if self._closing:
                await self.loop.aclose()
                return None
            nxt = SessionStart(self.session_id, self.loop.busy_policy,
                               messages_to_json(self.loop.session_messages(self.session_id)),
                               self.seq_base + self.last_seq, dict(self._results))
            if expired:
                await self.loop.aclose()
                return nxt
        workflow.continue_as_new(nxt)

    async def _wait_for_the_end(self) -> bool:
        """Wait until the session is idle (no turn, nothing queued or asked, no update under
        way: an update that arrived while waiting may have started a turn, which must not be
        cut off) and either closing, due to continue as new (False), or idle for
        ``idle_close`` seconds on end (True)."""
        def idle() -> bool:
            return self._idle() and workflow.all_handlers_finished()

        def ending() -> bool:
            return self._closing or self._should_continue()

        while True:
            await workflow.wait_condition(idle)
            if ending():
                return False
            try:
                await workflow.wait_condition(lambda: not idle() or ending(),
                                              timeout=self.config.idle_close)
            except TimeoutError:
                return True

    def _should_continue(self) -> bool:
        info = workflow.info()
        return (info.is_continue_as_new_suggested()
                or info.get_current_history_length() > self.config.max_history)

    def _idle(self) -> bool:
        return (not self.loop.busy(self.session_id) and not self.requests
                and not self.loop.queued_messages(self.session_id))

    async def _pump(self) -> None:
        async for first in self._events:
            self._publish([first, *self._events.drain_nowait()])

    def _publish(self, batch: list[Event]) -> None:
        rows: list[tuple[int, dict[str, Any]]] = []
        for event in batch:
            self.last_seq = event.seq
            self.requests.see(event, workflow.now().timestamp())
            if event.kind in _LIVE_KINDS:
                continue
            number = self.seq_base + event.seq
            data = event_to_dict(event)
            data["seq"] = number
            rows.append((number, data))
        # Also while replaying: what the stream holds already is skipped by its high-water
        # mark, and what a dead worker never published is published now.
        publisher = self.config.publisher
        if publisher is not None:
            publisher.put(self.session_id, rows)

    def _changes(self) -> tuple[bool, int, int]:
        return self.loop.busy(self.session_id), self.requests.version, self.last_seq

    def _moved(self, seen: tuple[bool, int, int]) -> bool:
        return self._changes() != seen

    async def _keep_memo(self) -> None:
        while True:
            self._remember()
            await workflow.wait_condition(functools.partial(self._moved, self._changes()))

    def _remember(self, closed: bool = False) -> None:
        """Keep the session's summary in the workflow's memo when it changed: the list of
        sessions and of waiting requests is one visibility query, not a query per session."""
        messages = self.loop.session_messages(self.session_id)
        memo = {"title": session_title(messages, None), "messages": len(messages),
                "busy": self.loop.busy(self.session_id), "closed": closed,
                "requests": self.requests.listing()}
        if memo != self._memo:
            self._memo = memo
            workflow.upsert_memo({MEMO: {**memo, "updated": workflow.now().timestamp()}})

    # -- messages -----------------------------------------------------------------------------

    @workflow.update(name="send")
    async def send(self, text: str, policy: str | None) -> dict[str, Any]:
        with self._handling():
            # The loop checks the policy (a ValueError answered to the caller).
            sent: Any = self.loop.send(text, self.session_id, cast("BusyPolicy | None", policy))
            self._keep(sent.message_id, sent)
            return _receipt_json(sent, action=getattr(sent, "action", "started"))

    @workflow.update(name="steer")
    async def steer(self, text: str) -> dict[str, Any]:
        with self._handling():
            return _receipt_json(self.loop.inject_steering(text, self.session_id))

    @workflow.update(name="follow_up")
    async def follow_up(self, text: str) -> dict[str, Any]:
        with self._handling():
            return _receipt_json(self.loop.inject_follow_up(text, self.session_id))

    @workflow.update(name="result")
    async def result(self, message_id: str) -> dict[str, Any]:
        """How the turn that took message ``message_id`` (from ``send``) ended."""
        with self._handling():
            done = self._results.get(message_id)
            if done is not None:
                return done
            waiting = self._waiting.get(message_id)
            if waiting is None:
                raise LookupError(f"no turn is known for message {message_id!r}")
            await workflow.wait_condition(lambda: message_id in self._results)
            return self._results[message_id]

    def _keep(self, message_id: str, waiting: Any) -> None:
        self._waiting[message_id] = waiting

        async def settle() -> None:
            try:
                self._results[message_id] = _turn_json(await waiting)
            except Exception as exc:  # the message was dropped (its lane closed)
                self._results[message_id] = {"turn_id": None, "status": "dropped",
                                             "text": "", "error": str(exc)}
            del self._waiting[message_id]
            while len(self._results) > _KEEP_RESULTS:
                del self._results[next(iter(self._results))]

        task = asyncio.create_task(settle())
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    @workflow.update(name="revoke")
    async def revoke(self, message_id: str) -> bool:
        with self._handling():
            return self.loop.revoke_message(message_id)

    @workflow.update(name="edit")
    async def edit(self, message_id: str, text: str) -> bool:
        with self._handling():
            return self.loop.edit_message(message_id, text)

    # -- controls -----------------------------------------------------------------------------

    @workflow.update(name="interrupt")
    async def interrupt(self, mode: str, hint: str | None) -> bool:
        with self._handling():
            if mode == "graceful":
                return self.loop.interrupt_graceful(self.session_id, hint)
            if mode == "hard":
                return self.loop.interrupt_hard(self.session_id)
            raise ValueError(f"interrupt mode must be graceful or hard, not {mode!r}")

    @workflow.update(name="cancel")
    async def cancel(self, mode: str) -> bool:
        with self._handling():
            chosen = _CANCEL_MODES.get(mode)
            if chosen is None:
                raise ValueError(f"cancel mode must be one of {sorted(_CANCEL_MODES)}, "
                                 f"not {mode!r}")
            handle = self.loop.cancel(self.session_id, chosen)
            return handle is not None and handle.contributed

    @workflow.update(name="resolve_approval")
    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool:
        with self._handling():
            # A TurnHandle (a parked turn resumed) cannot happen here: the workflow never parks.
            return self.loop.resolve_approval(request_id, approved, reason) is not False

    @workflow.update(name="answer")
    async def answer(self, request_id: str, value: Any) -> bool:
        """Answer a tool's question; a value outside its choices or schema is refused
        (``InvalidAnswerError``) and the question stays open."""
        with self._handling():
            return self.loop.answer(request_id, value) is not False

    @workflow.update(name="close")
    async def close(self) -> bool:
        """End the session's workflow once it is idle (the history stays in Temporal)."""
        self._closing = True
        return True

    # -- queries ------------------------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> dict[str, Any]:
        messages = self.loop.session_messages(self.session_id)
        return {
            "title": session_title(messages, None), "messages": len(messages),
            "busy": self.loop.busy(self.session_id),
            "queued": [{"message_id": m.message_id, "kind": m.kind, "text": m.text,
                        "state": m.state.value, "turn_id": m.turn_id}
                       for m in self.loop.queued_messages(self.session_id)],
            "requests": self.requests.listing(),
            "last_seq": self.seq_base + self.last_seq,
        }

    @workflow.query(name="messages")
    def messages(self) -> list[dict[str, Any]]:
        return messages_to_json(self.loop.session_messages(self.session_id))

