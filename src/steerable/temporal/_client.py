"""``TemporalClient``: send, steer, interrupt, cancel, answer and follow sessions that run on
Temporal workers, from any process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from steerable import BusyPolicy, Message
from steerable.errors import (
    InvalidAnswerError,
    RequestClosedError,
    SessionBusyError,
    UnknownRequestError,
)
from steerable.storage._ids import check_session_id
from steerable.storage._records import session_title
from steerable.temporal._codec import messages_from_json
from steerable.temporal._eventlog import DEFAULT_PREFIX, EventLog, StreamedEvent
from steerable.temporal._worker import DEFAULT_TASK_QUEUE
from steerable.temporal._workflow import MEMO, WORKFLOW, SessionStart

__all__ = ["Receipt", "TemporalClient", "TurnOutcome", "workflow_id"]


log = logging.getLogger("steerable.temporal")

_PREFIX = "steerable-session-"
_RUNNING = WorkflowExecutionStatus.RUNNING
_LISTED = 'ExecutionStatus IN ("Running", "Completed")'
"""Running sessions, and those closed while idle (or for good: their memo says which)."""


def workflow_id(session_id: str) -> str:
    return f"{_PREFIX}{check_session_id(session_id)}"


def session_of(workflow_id: str) -> str | None:
    """The session id of a session's workflow id (None: not one)."""
    return workflow_id[len(_PREFIX):] if workflow_id.startswith(_PREFIX) else None


@dataclass(frozen=True, slots=True)
class Receipt:
    """A message's receipt (SPEC 10): falsy when refused. ``action`` is what ``send`` did
    (``started``, ``steered``, ``queued``...); ``turn_id`` the turn that took it, if known."""

    message_id: str
    state: str
    accepted: bool
    turn_id: str | None = None
    action: str | None = None

    def __bool__(self) -> bool:
        return self.accepted


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    turn_id: str | None
    status: str
    text: str
    iterations: int = 0
    follow_ups: tuple[str, ...] = ()
    unprocessed: tuple[str, ...] = ()
    error: str | None = None


_POLICIES: tuple[str, ...] = get_args(BusyPolicy)


def check_policy(policy: str) -> str:
    """A busy policy's name, checked here so a typo costs no round trip."""
    if policy not in _POLICIES:
        raise ValueError(f"busy policy must be one of {', '.join(_POLICIES)}, got {policy!r}")
    return policy


_ERRORS: dict[str, type[Exception]] = {
    "SessionBusyError": SessionBusyError, "ValueError": ValueError, "LookupError": LookupError,
    "InvalidAnswerError": InvalidAnswerError, "RequestClosedError": RequestClosedError,
    "UnknownRequestError": UnknownRequestError}
_ATTEMPTS = 3
_T = TypeVar("_T")
NOT_READY_WAIT = 60.0
"""How long a call waits out a session whose workflow task is failing (its worker died or
hung mid-task and the retry has not yet succeeded elsewhere) before it gives up."""


def _not_ready(exc: RPCError) -> bool:
    """The server refused an update because the session's workflow task is in a failed state
    (timed out on a worker that hung, failed on one that crashed): it passes once another
    worker runs the task again, so the update is sent again."""
    return exc.status is RPCStatusCode.FAILED_PRECONDITION and (
        b"WorkflowNotReadyFailure" in exc.raw_grpc_status)


async def _until_ready(session_id: str, call: Callable[[], Awaitable[_T]]) -> _T:
    """``call()``, again while the session's workflow task is failing (``_not_ready``): an
    update that was refused so was not delivered, so sending it again sends it once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + NOT_READY_WAIT
    pause = 0.1
    while True:
        try:
            return await call()
        except RPCError as exc:
            if not _not_ready(exc):
                raise
            if loop.time() + pause > deadline:
                raise RuntimeError(
                    f"session {session_id!r}: its workflow task has kept failing for "
                    f"{NOT_READY_WAIT:.0f} s (see the workers' logs): {exc}") from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


class TemporalClient:
    """Talks to sessions' workflows; ``events_url`` (Redis) to follow their events."""

    def __init__(self, client: Client, *, task_queue: str = DEFAULT_TASK_QUEUE,
                 events_url: str | None = None, events_prefix: str = DEFAULT_PREFIX,
                 busy_policy: str = "steer") -> None:
        self.client = client
        self.task_queue = task_queue
        self.busy_policy = check_policy(busy_policy)
        self.log = EventLog(events_url, prefix=events_prefix) if events_url else None
        self._sending: set[asyncio.Task[None]] = set()

    @classmethod
    async def connect(cls, target: str = "127.0.0.1:7233", *, namespace: str = "default",
                      **kwargs: Any) -> TemporalClient:
        return cls(await Client.connect(target, namespace=namespace), **kwargs)

    async def aclose(self) -> None:
        """Close the event log, once the messages of ``send_nowait`` are sent."""
        await asyncio.gather(*self._sending)
        if self.log is not None:
            await self.log.aclose()

    def _handle(self, session_id: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(workflow_id(session_id))

    async def _update(self, session_id: str, name: str, *args: Any) -> Any:
        handle = self._handle(session_id)
        try:
            return await _until_ready(session_id, lambda: handle.execute_update(
                name, args=list(args)))
        except WorkflowUpdateFailedError as exc:
            raise _mapped(exc) from None

    async def _control(self, session_id: str, name: str, *args: Any) -> Any:
        """An update for a session that may have no workflow: None then."""
        try:
            return await self._update(session_id, name, *args)
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return None
            raise

    # -- messages -----------------------------------------------------------------------------

    async def send(self, text: str, session_id: str, policy: str | None = None) -> Receipt:
        """Give the session a message (SPEC 4.9): an idle session starts a turn, a busy one
        follows ``policy``. Starts the session's workflow if it has none running: from the
        state its last run closed with (idle), or empty.

        One round trip in the usual cases: an update-with-start that reaches the running
        workflow, or starts the first one, and is refused only where a closed run exists
        (``REJECT_DUPLICATE``); then the closed run's state starts the next one."""
        args = [text, None if policy is None else check_policy(policy)]
        for _ in range(_ATTEMPTS):
            try:
                try:
                    raw = await self._start_with(session_id, args, after_closed=False)
                except WorkflowAlreadyStartedError:  # closed: continue from its state
                    raw = await self._start_with(session_id, args, after_closed=True,
                                                 state=await self._closed_state(session_id))
            except WorkflowUpdateFailedError as exc:
                raise _mapped(exc) from None
            except (RPCError, WorkflowAlreadyStartedError) as exc:
                # The run closed, or another was started, between two calls: once more.
                if isinstance(exc, RPCError) and exc.status is not RPCStatusCode.NOT_FOUND:
                    raise
                continue
            return await self._indexed(session_id, raw)
        raise RuntimeError(f"session {session_id!r}: its workflow kept closing while a "
                           "message was sent; try again")

    def send_nowait(self, text: str, session_id: str, policy: str | None = None) -> None:
        """``send`` from code that cannot wait (a callback on this event loop: a background
        command that ended tells its session); a failure is logged. ``aclose`` waits for
        what is under way."""
        async def go() -> None:
            try:
                await self.send(text, session_id, policy)
            except Exception as exc:
                log.warning("session %s was not told %r: %s", session_id, text[:80], exc)

        task = asyncio.get_running_loop().create_task(go())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _start_with(self, session_id: str, args: list[Any], *, after_closed: bool,
                          state: dict[str, Any] | None = None) -> Any:
        """``send`` as an update-with-start: it reaches the running workflow if there is
        one. Else, without ``after_closed``, starting is refused where an earlier run exists
        (``WorkflowAlreadyStartedError``: the caller reads what it closed with); with it,
        the next run starts from ``state`` (what the last run closed with; None: empty)."""
        start_state = SessionStart(session_id, self.busy_policy) if state is None else \
            SessionStart(state["session_id"], state["busy_policy"], state["history"],
                         state["seq_base"], state["results"])
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            WORKFLOW, start_state, id=workflow_id(session_id), task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if after_closed
            else WorkflowIDReusePolicy.REJECT_DUPLICATE)
        return await _until_ready(session_id, lambda: self.client.
                                  execute_update_with_start_workflow(
                                      "send", args=args, start_workflow_operation=start))

    async def _closed_state(self, session_id: str) -> dict[str, Any] | None:
        """What the session's last run closed with: its state when it closed idle; None
        when it never ran, was closed for good (``close_session``) or failed."""
        handle = self._handle(session_id)
        try:
            status = (await handle.describe()).status
            if status is not WorkflowExecutionStatus.COMPLETED:
                return None
            state: dict[str, Any] | None = await handle.result()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return None
            raise
        return state

    async def result(self, session_id: str, message_id: str) -> TurnOutcome:
        """How the turn that took ``message_id`` (sent with ``send``) ended; waits for it."""
        try:
            raw = await self._update(session_id, "result", message_id)
        except RPCError as exc:  # closed since: the results went with its state
            if exc.status is not RPCStatusCode.NOT_FOUND:
                raise
            last = await self._closed_state(session_id)
            raw = None if last is None else last["results"].get(message_id)
            if raw is None:
                raise LookupError(f"no turn is known for message {message_id!r}") from None
        return TurnOutcome(raw["turn_id"], raw["status"], raw["text"], raw.get("iterations", 0),
                           tuple(raw.get("follow_ups", ())), tuple(raw.get("unprocessed", ())),
                           raw.get("error"))

    async def run_turn(self, text: str, session_id: str) -> TurnOutcome:
        receipt = await self.send(text, session_id)
        return await self.result(session_id, receipt.message_id)

    async def inject_steering(self, text: str, session_id: str) -> Receipt:
        return await self._indexed(session_id, await self._control(session_id, "steer", text))

    async def inject_follow_up(self, text: str, session_id: str) -> Receipt:
        return await self._indexed(session_id,
                                   await self._control(session_id, "follow_up", text))

    async def _indexed(self, session_id: str, raw: dict[str, Any] | None) -> Receipt:
        receipt = _receipt(raw) if raw is not None else _refused()
        if receipt and receipt.state == "queued" and self.log is not None:
            await self.log.remember_message(receipt.message_id, session_id)
        return receipt

    async def revoke_message(self, message_id: str, *, session_id: str | None = None) -> bool:
        """Withdraw a message that is still queued (SPEC 10); False once it is not."""
        session_id = session_id or await self._message_session(message_id)
        return session_id is not None and bool(
            await self._control(session_id, "revoke", message_id))

    async def edit_message(self, message_id: str, text: str, *,
                           session_id: str | None = None) -> bool:
        """Change the text of a message that is still queued; False once it is not."""
        session_id = session_id or await self._message_session(message_id)
        return session_id is not None and bool(
            await self._control(session_id, "edit", message_id, text))

    async def _message_session(self, message_id: str) -> str | None:
        if self.log is None:
            raise ValueError("finding a message's session needs the client's events_url "
                             "(or pass session_id)")
        return await self.log.message_session(message_id)

    # -- controls -----------------------------------------------------------------------------

    async def interrupt_graceful(self, session_id: str, hint: str | None = None) -> bool:
        return bool(await self._control(session_id, "interrupt", "graceful", hint))

    async def interrupt_hard(self, session_id: str) -> bool:
        return bool(await self._control(session_id, "interrupt", "hard", None))

    async def cancel(self, session_id: str, mode: str = "immediate") -> bool:
        """``mode``: ``immediate``, ``after_model`` or ``after_tools`` (SPEC 4.8)."""
        return bool(await self._control(session_id, "cancel", mode))

    async def resolve_approval(self, request_id: str, approved: bool, reason: str = "", *,
                               session_id: str | None = None) -> bool:
        """Answer an approval; its session is found through the event log when not given."""
        session_id = session_id or await self._request_session(request_id)
        return session_id is not None and bool(await self._control(
            session_id, "resolve_approval", request_id, approved, reason))

    async def answer(self, request_id: str, value: Any, *, session_id: str | None = None) -> None:
        """Answer a tool's question (``ctx.ask``) with ``value``, checked against its
        choices or schema in the workflow: ``InvalidAnswerError`` leaves it open,
        ``UnknownRequestError`` when no session waits on ``request_id``."""
        session_id = session_id or await self._request_session(request_id)
        if session_id is None or await self._control(session_id, "answer", request_id,
                                                     value) is None:
            raise UnknownRequestError(f"no open request {request_id!r}")

    async def _request_session(self, request_id: str) -> str | None:
        if self.log is None:
            raise ValueError("finding a request's session needs the client's events_url (or "
                             "pass session_id)")
        return await self.log.request_session(request_id)

    async def close_session(self, session_id: str) -> bool:
        """End the session's workflow once idle, for good (a later ``send`` starts afresh)."""
        return bool(await self._control(session_id, "close"))

    async def delete_session(self, session_id: str) -> bool:
        """Forget the session: its running workflow closes for good once idle (waited for);
        one closed while idle, whose state a ``send`` would continue from, is deleted.
        False when there is no such session."""
        handle = self._handle(session_id)
        if await self._running(session_id) and await self._control(session_id, "close"):
            await handle.result()
            return True
        if await self._closed_state(session_id) is None:
            return False
        await self.client.workflow_service.delete_workflow_execution(
            DeleteWorkflowExecutionRequest(namespace=self.client.namespace,
                                           workflow_execution=WorkflowExecution(
                                               workflow_id=handle.id)))
        return True

    # -- reading ------------------------------------------------------------------------------

    async def _running(self, session_id: str) -> bool:
        try:
            status = (await self._handle(session_id).describe()).status
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return False
            raise
        return status is _RUNNING

    async def state(self, session_id: str) -> dict[str, Any] | None:
        """``busy``, ``queued`` messages, open ``requests``, ``last_seq``; None for a session
        that never ran or was closed for good (``close_session``). A session closed while
        idle reads from the state it closed with."""
        if await self._running(session_id):
            state: dict[str, Any] = await self._handle(session_id).query("state")
            return state
        last = await self._closed_state(session_id)
        if last is None:
            return None
        messages = messages_from_json(last["history"])
        return {"title": session_title(messages, None), "messages": len(messages),
                "busy": False, "queued": [], "requests": [], "last_seq": last["seq_base"]}

    async def session_messages(self, session_id: str) -> list[Message]:
        if await self._running(session_id):
            raw = await self._handle(session_id).query("messages")
        else:
            last = await self._closed_state(session_id)
            raw = [] if last is None else last["history"]
        return messages_from_json(raw)

    async def list_sessions(self) -> list[dict[str, Any]]:
        """The sessions of this task queue, newest first: ``id``, ``title``, ``messages``,
        ``busy``, ``open`` (its workflow runs), ``updated`` (epoch seconds). One visibility
        query (each run keeps its summary in its memo), not a query per session."""
        rows: dict[str, dict[str, Any]] = {}
        async for run in self.client.list_workflows(self._runs(_LISTED)):
            sid = session_of(run.id)
            memo = await run.memo_value(MEMO, default=None)
            if sid is None or sid in rows or not isinstance(memo, dict) or memo["closed"]:
                continue  # (a session's runs come newest first: its first row is its last)
            rows[sid] = {"id": sid, "title": memo["title"], "messages": memo["messages"],
                         "busy": memo["busy"] and run.status is _RUNNING,
                         "open": run.status is _RUNNING, "updated": memo.get("updated")}
        return sorted(rows.values(), key=lambda r: r["updated"] or 0, reverse=True)

    async def pending_requests(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Approvals and questions waiting for a person, oldest first, across the sessions
        of this task queue (or only ``session_id``'s), from one visibility query."""
        query = self._runs('ExecutionStatus="Running"')
        if session_id is not None:
            query += f' AND WorkflowId="{workflow_id(session_id)}"'
        out: list[dict[str, Any]] = []
        async for run in self.client.list_workflows(query):
            memo = await run.memo_value(MEMO, default=None)
            if isinstance(memo, dict):
                out += memo["requests"]
        return sorted(out, key=lambda r: r["created"])

    def _runs(self, condition: str) -> str:
        return (f'WorkflowType="{WORKFLOW}" AND TaskQueue="{self.task_queue}" '
                f"AND {condition}")

    def events(self, session_id: str, after: str | None = None) -> AsyncIterator[StreamedEvent]:
        """Follow the session's events (stream id, event dict), whichever worker runs it."""
        if self.log is None:
            raise ValueError("following events needs the client's events_url (Redis)")
        return self.log.follow(session_id, after)


def _receipt(raw: dict[str, Any]) -> Receipt:
    return Receipt(raw["message_id"], raw["state"], raw["accepted"], raw.get("turn_id"),
                   raw.get("action"))


def _refused() -> Receipt:
    return Receipt("", "rejected", False)


def _mapped(exc: WorkflowUpdateFailedError) -> Exception:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return _ERRORS.get(cause.type or "", RuntimeError)(cause.message)
    return RuntimeError(str(cause or exc))
