"""The A2A ``AgentExecutor`` over a runner: a task follows one turn of a session.

A context is a session (``contextId`` is the session id), a task a turn. ``execute`` sends the
task's first message through the runner's busy policy (``follow_up`` unless the message's
metadata says ``busy_policy``), then follows the session's events and publishes what they mean
(``_updates.TurnView``). A tool call waiting for approval, or a tool's question (``ctx.ask``),
parks the task in ``INPUT_REQUIRED`` and ``execute`` returns, as the SDK expects; the next
message to the task carries the decision or the answer (text, or a data part that fits the
question's schema; one that does not fit keeps the task waiting, saying why) and resumes
following from the event after the request. A message to a
task whose turn is working steers that turn (``steer``, called by the request handler before
the SDK would queue the message behind the running request). ``cancel`` stops the turn
after its model call (``CancelMode.AFTER_MODEL``), denying an approval that waits. Such a
cancel leaves the session a pending turn (resumable through the native API); in A2A a
cancelled task is over, so the next message to the context drops that pending turn.

What the tasks are doing lives here, in memory, as the SDK's in-memory task store does; a
server restart forgets both.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from a2a.helpers import get_data_parts, get_text_parts, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, TaskState
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from steerable.drivers._lanes import BusyPolicy, check_policy
from steerable.errors import (
    CheckpointError,
    InvalidAnswerError,
    RequestError,
    SteerableError,
)
from steerable.protocols.a2a._updates import (
    Approval,
    End,
    Progress,
    Question,
    TurnView,
    answer_value,
    decision,
)

__all__ = ["Runner", "TurnExecutor", "busy_policy"]

_SESSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_KEPT = 4096
"""Tasks remembered; past that the oldest ended ones are forgotten first."""


class _Sent(Protocol):
    @property
    def turn_id(self) -> str | None: ...

    @property
    def action(self) -> str: ...

    @property
    def message_id(self) -> str | None: ...


class _Taken(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def detail(self) -> str: ...


class Runner(Protocol):
    """What the adapter calls: a subset of ``steerable.server.SessionRunner``."""

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None, *,
                   discard_pending: bool = False) -> _Sent: ...

    async def steer(self, session_id: str, text: str) -> _Taken: ...

    async def cancel(self, session_id: str,
                     mode: Literal["immediate", "after_model", "after_tools"]) -> bool: ...

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool: ...

    async def answer_request(self, request_id: str, approved: bool | None, value: Any,
                             reason: str) -> str | None: ...

    async def revoke(self, message_id: str) -> bool: ...

    async def get_session(self, session_id: str) -> dict[str, Any]: ...

    def events(self, session_id: str, after: int | None) -> AsyncIterator[tuple[int, str]]: ...


@dataclass(eq=False)
class _Tracked:
    """A task and the turn it follows."""

    session_id: str
    view: TurnView
    after: int | None = None
    """The seq of the last event that meant something (a follower resumes after it)."""
    asked: Approval | Question | None = None
    """The request the task is parked on (``INPUT_REQUIRED``)."""
    watcher: asyncio.Task[None] | None = None
    """While the task waits: watches for an answer given elsewhere (``_watch``)."""
    cancelled: bool = False
    ended: bool = False
    sent: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the task's message has been given to the runner (``view`` is then set)."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while no ``execute`` follows the turn."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the terminal state is written: a follower and a cancel may both try."""

    def __post_init__(self) -> None:
        self.idle.set()


def busy_policy(message: Message, default: BusyPolicy) -> BusyPolicy:
    """The ``busy_policy`` of a message's metadata, or ``default``."""
    # A protobuf Struct: no ``get`` at run time, whatever the linter infers.
    metadata = message.metadata
    value = metadata["busy_policy"] if "busy_policy" in metadata else default  # noqa: SIM401
    try:
        return check_policy(value)
    except ValueError as exc:
        raise InvalidParamsError(message=str(exc)) from None


async def _close(events: AsyncIterator[tuple[int, str]]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def _note(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


class TurnExecutor(AgentExecutor):
    """Tasks as turns of ``runner``'s sessions. ``cancel_wait``: seconds a cancel waits for
    the turn to stop before it answers anyway (the turn still stops after its model call)."""

    def __init__(self, runner: Runner, *, cancel_wait: float = 30.0) -> None:
        self.runner = runner
        self.cancel_wait = cancel_wait
        self._tasks: OrderedDict[str, _Tracked] = OrderedDict()
        self._watchers: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Stop watching the tasks that wait for input (the server is shutting down)."""
        watchers = list(self._watchers)
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)

    def _keep(self, task_id: str, tracked: _Tracked) -> None:
        self._tasks[task_id] = tracked
        while len(self._tasks) > _KEPT:
            victim = next((t for t, v in self._tasks.items() if v.ended), None)
            del self._tasks[victim if victim is not None else next(iter(self._tasks))]

    # -- execute: a new task, or the answer to a parked one --------------------------------

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, sid = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, sid)
        if context.current_task is None:
            await self._start(context, event_queue, updater)
            return
        tracked = self._tasks.get(task_id)
        if tracked is None or tracked.ended:
            await updater.failed(_note(updater, "this server no longer follows the task (it "
                                                "restarted, or forgot the task)"))
            return
        await self._answer(tracked, context, updater)

    async def _start(self, context: RequestContext, queue: EventQueue,
                     updater: TaskUpdater) -> None:
        message = context.message
        assert message is not None  # a task starts from a message
        await queue.enqueue_event(new_task_from_user_message(message))
        sid, text = updater.context_id, context.get_user_input()
        refusal = None if _SESSION.match(sid) else (
            "contextId is the session id: 1-128 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit")
        if refusal is None and not text.strip():
            refusal = "the message has no text"
        if refusal is not None:
            await updater.reject(_note(updater, refusal))
            return
        policy = busy_policy(message, "follow_up")
        # Known (and followed) before the message is sent: a cancel that comes meanwhile
        # waits for the send, then stops the turn it started.
        tracked = _Tracked(sid, TurnView(None))
        tracked.idle.clear()
        self._keep(updater.task_id, tracked)
        events = self.runner.events(sid, None)  # attached before the turn can start
        try:
            try:
                sent = await self._send(sid, text, policy)
            except (LookupError, ValueError, SteerableError, ConnectionError) as exc:
                tracked.ended = True
                await updater.reject(_note(updater, str(exc)))
                return
            finally:
                tracked.sent.set()
            running = sent.action in ("started", "steered")
            tracked.view = TurnView(sent.turn_id if running else None, sent.message_id)
            if running and tracked.view.turn_id is not None:
                await updater.start_work()
            elif not running:
                await updater.submit(_note(updater, f"{sent.action}: waiting for a turn of "
                                                    "its own"))
            # else started on a worker that has not said which turn: working once it starts
            await self._follow(tracked, events, updater)
        finally:
            tracked.idle.set()
            await _close(events)

    async def _send(self, sid: str, text: str, policy: BusyPolicy) -> _Sent:
        """Send; a checkpoint left by a task cancelled here is dropped first (the cancelled
        task is over), any other pending turn refuses the message as it would on the API."""
        try:
            return await self.runner.send(sid, text, policy)
        except CheckpointError:
            pending = (await self.runner.get_session(sid)).get("pending_turn") or {}
            ours = any(t.cancelled and pending.get("turn_id") in t.view.turns
                       for t in self._tasks.values() if t.session_id == sid)
            if not ours:
                raise
            return await self.runner.send(sid, text, policy, discard_pending=True)

    async def _answer(self, tracked: _Tracked, context: RequestContext,
                      updater: TaskUpdater) -> None:
        message = context.message
        assert message is not None
        await self._unwatch(tracked)
        events = self.runner.events(tracked.session_id, tracked.after)
        try:
            if tracked.asked is not None and not await self._give(tracked, message, updater):
                return
            await self._follow(tracked, events, updater)
        finally:
            await _close(events)

    async def _give(self, tracked: _Tracked, message: Message, updater: TaskUpdater) -> bool:
        """Give the answer a message carries to the request the task waits on; False when
        it carries none that fits (the task stays ``INPUT_REQUIRED``, saying why)."""
        asked = tracked.asked
        assert asked is not None
        texts, data = get_text_parts(message.parts), get_data_parts(message.parts)
        if isinstance(asked, Approval):
            answer = decision(texts, data)
            if answer is None:
                await updater.requires_input(updater.new_agent_message(
                    [new_text_part("That is not an answer."), *asked.parts]))
                return False
            tracked.asked = None
            taken = await self.runner.resolve_approval(asked.request_id, *answer)
            note = ("approved" if answer[0] else "denied") if taken else \
                "already answered (elsewhere, or it timed out)"
        else:
            value = answer_value(asked, texts, data)
            try:
                if value is None:
                    raise InvalidAnswerError("the message has no answer")
                await self.runner.answer_request(asked.request_id, None, value, "")
                note = "answered"
            except InvalidAnswerError as exc:
                await updater.requires_input(updater.new_agent_message(
                    [new_text_part(f"That is not an answer: {exc}"), *asked.parts]))
                return False
            except RequestError:
                note = "already answered (elsewhere)"
            tracked.asked = None
        await updater.start_work(_note(updater, note))
        return True

    # -- following the turn --------------------------------------------------------------

    async def _follow(self, tracked: _Tracked, events: AsyncIterator[tuple[int, str]],
                      updater: TaskUpdater) -> None:
        """Publish the turn's updates until it ends or parks on an approval (while the task
        is being cancelled, an approval is denied instead)."""
        tracked.idle.clear()
        try:
            async for seq, data in events:
                update = tracked.view.feed(seq, json.loads(data))
                if update is None:
                    continue
                tracked.after = seq
                if tracked.ended:
                    return  # a cancel answered first
                if isinstance(update, End):
                    await self._finish(tracked, updater, update)
                    return
                if isinstance(update, Progress):
                    if update.kind == "turn_start" and tracked.cancelled:
                        # Cancelled while it waited for its turn, too late for a revoke:
                        # stop the turn now that it is known.
                        await self.runner.cancel(tracked.session_id, "after_model")
                    await updater.update_status(
                        TaskState.TASK_STATE_WORKING, self._message(updater, update.parts),
                        metadata={"steerable": {"event": update.kind, "seq": seq}})
                elif tracked.cancelled:
                    if isinstance(update, Approval):  # (a question waits for the cancel)
                        await self.runner.resolve_approval(update.request_id, False,
                                                           "the task was cancelled")
                else:
                    tracked.asked = update
                    await updater.requires_input(self._message(updater, update.parts))
                    self._watch(tracked, updater)
                    return
            raise ConnectionError("the session's event stream ended before the turn did")
        finally:
            tracked.idle.set()

    # -- an answer given elsewhere -------------------------------------------------------

    def _watch(self, tracked: _Tracked, updater: TaskUpdater) -> None:
        """While the task waits, watch the session: when its request is answered elsewhere
        (``steerable answer``, ``/v1/requests``, the web page, a timeout) the task goes on
        working at once, published on the task's queue (the SDK keeps it for a task that
        waits for input), without waiting for a message."""
        watcher = asyncio.get_running_loop().create_task(self._answered_elsewhere(tracked,
                                                                                  updater))
        tracked.watcher = watcher
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _unwatch(self, tracked: _Tracked) -> None:
        watcher, tracked.watcher = tracked.watcher, None
        if watcher is not None and watcher is not asyncio.current_task():
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def _answered_elsewhere(self, tracked: _Tracked, updater: TaskUpdater) -> None:
        asked = tracked.asked
        assert asked is not None
        events = self.runner.events(tracked.session_id, tracked.after)
        try:
            async for _, data in events:
                event = json.loads(data)
                if event.get("request_id") == asked.request_id and event.get("kind") in (
                        "approval_resolved", "question_answered"):
                    break
            else:
                return
        finally:
            await _close(events)
        if tracked.asked is not asked or tracked.cancelled or tracked.ended:
            return
        tracked.asked = None
        await updater.start_work(_note(updater, "answered elsewhere"))
        events = self.runner.events(tracked.session_id, tracked.after)
        try:
            await self._follow(tracked, events, updater)
        finally:
            await _close(events)

    @staticmethod
    def _message(updater: TaskUpdater, parts: list[Part]) -> Message:
        return updater.new_agent_message(parts)

    async def _finish(self, tracked: _Tracked, updater: TaskUpdater, end: End) -> None:
        async with tracked.lock:
            if tracked.ended:
                return
            tracked.ended = True
            if end.text:
                await updater.add_artifact([new_text_part(end.text)], name="response",
                                           last_chunk=True)
            note = None
            if end.state != TaskState.TASK_STATE_COMPLETED or end.detail:
                note = _note(updater, f"the turn ended {end.status}"
                             + (f": {end.detail}" if end.detail else ""))
            await updater.update_status(end.state, note,
                                        metadata={"steerable": {"status": end.status}})

    # -- steering and cancelling -----------------------------------------------------------

    async def steer(self, task_id: str, message: Message) -> Literal["steered", "new", "sdk"]:
        """A message to task ``task_id``: ``steered`` when it went into the task's working
        turn; ``new`` when its ``busy_policy`` asks for a turn of its own (a new task of the
        same context); ``sdk`` when the SDK should take it (the task waits on an approval or a
        question, is over, or is unknown here). Raises the SDK's error when the turn cannot take it."""
        tracked = self._tasks.get(task_id)
        if tracked is None or tracked.ended or tracked.asked is not None:
            return "sdk"
        if busy_policy(message, "steer") != "steer":
            return "new"
        if tracked.view.turn_id is None:
            raise UnsupportedOperationError(message=(
                f"task {task_id} waits for a turn of its own and cannot be steered yet; send "
                "the message without taskId to queue it"))
        text = "\n".join(get_text_parts(message.parts))
        if not text.strip():
            raise InvalidParamsError(message="a steering message needs text")
        taken = await self.runner.steer(tracked.session_id, text)
        if not taken.ok:
            raise UnsupportedOperationError(message=(
                f"the turn of task {task_id} took no steering ({taken.detail}); send the "
                "message without taskId for a turn of its own"))
        return "steered"

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, sid = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, sid)
        tracked = self._tasks.get(task_id)
        if tracked is None:
            await updater.cancel()
            return
        tracked.cancelled = True
        await self._unwatch(tracked)
        with suppress(TimeoutError):
            await asyncio.wait_for(tracked.sent.wait(), self.cancel_wait)
        if tracked.ended or not tracked.sent.is_set():
            return
        events = None if not tracked.idle.is_set() else self.runner.events(sid, tracked.after)
        try:
            await self._stop(tracked)
            if events is None:  # an ``execute`` follows the turn: it publishes the end
                await asyncio.wait_for(tracked.idle.wait(), self.cancel_wait)
            else:
                await asyncio.wait_for(self._follow(tracked, events, updater), self.cancel_wait)
        except TimeoutError:
            await self._finish(tracked, updater, End(
                TaskState.TASK_STATE_CANCELED, "cancelled", "",
                "cancel requested; the turn stops after its model call"))
        finally:
            if events is not None:
                await _close(events)

    async def _stop(self, tracked: _Tracked) -> None:
        asked, tracked.asked = tracked.asked, None
        if isinstance(asked, Approval):
            await self.runner.resolve_approval(asked.request_id, False, "the task was cancelled")
        if tracked.view.turn_id is not None:
            await self.runner.cancel(tracked.session_id, "after_model")
        elif tracked.view.message_id is not None:
            # Too late when its turn is starting: the follower then stops that turn.
            await self.runner.revoke(tracked.view.message_id)

