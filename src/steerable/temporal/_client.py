"""``TemporalClient``: send, steer, interrupt, cancel, answer and follow sessions that run on
Temporal workers, from any process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, get_args

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from steerable import BusyPolicy, Message
from steerable.errors import SessionBusyError
from steerable.storage._ids import check_session_id
from steerable.temporal._codec import messages_from_json
from steerable.temporal._eventlog import DEFAULT_PREFIX, EventLog, StreamedEvent
from steerable.temporal._worker import DEFAULT_TASK_QUEUE
from steerable.temporal._workflow import WORKFLOW, SessionStart

__all__ = ["Receipt", "TemporalClient", "TurnOutcome", "workflow_id"]


def workflow_id(session_id: str) -> str:
    return f"steerable-session-{check_session_id(session_id)}"


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


_ERRORS: dict[str, type[Exception]] = {"SessionBusyError": SessionBusyError,
                                       "ValueError": ValueError, "LookupError": LookupError}


class TemporalClient:
    """Talks to sessions' workflows; ``events_url`` (Redis) to follow their events."""

    def __init__(self, client: Client, *, task_queue: str = DEFAULT_TASK_QUEUE,
                 events_url: str | None = None, events_prefix: str = DEFAULT_PREFIX,
                 busy_policy: str = "steer") -> None:
        self.client = client
        self.task_queue = task_queue
        self.busy_policy = check_policy(busy_policy)
        self.log = EventLog(events_url, prefix=events_prefix) if events_url else None

    @classmethod
    async def connect(cls, target: str = "127.0.0.1:7233", *, namespace: str = "default",
                      **kwargs: Any) -> TemporalClient:
        return cls(await Client.connect(target, namespace=namespace), **kwargs)

    async def aclose(self) -> None:
        if self.log is not None:
            await self.log.aclose()

    def _handle(self, session_id: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(workflow_id(session_id))

    async def _update(self, session_id: str, name: str, *args: Any) -> Any:
        try:
            return await self._handle(session_id).execute_update(name, args=list(args))
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
        follows ``policy``. Starts the session's workflow if it has none."""
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            WORKFLOW, SessionStart(session_id, self.busy_policy), id=workflow_id(session_id),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
        try:
            raw = await self.client.execute_update_with_start_workflow(
                "send", args=[text, None if policy is None else check_policy(policy)],
                start_workflow_operation=start)
        except WorkflowUpdateFailedError as exc:
            raise _mapped(exc) from None
        return await self._indexed(session_id, raw)

    async def result(self, session_id: str, message_id: str) -> TurnOutcome:
        """How the turn that took ``message_id`` (sent with ``send``) ended; waits for it."""
        raw = await self._update(session_id, "result", message_id)
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
        if session_id is None:
            if self.log is None:
                raise ValueError("resolve_approval needs session_id when the client has no "
                                 "events_url")
            session_id = await self.log.approval_session(request_id)
            if session_id is None:
                return False
        return bool(await self._control(session_id, "resolve_approval", request_id, approved,
                                        reason))

    async def close_session(self, session_id: str) -> bool:
        """End the session's workflow once idle (a later ``send`` starts a new one, empty)."""
        return bool(await self._control(session_id, "close"))

    # -- reading ------------------------------------------------------------------------------

    async def state(self, session_id: str) -> dict[str, Any] | None:
        """``busy``, ``queued`` messages, open ``approvals``; None for an unknown session (or
        one whose workflow has ended: ``close_session``)."""
        handle = self._handle(session_id)
        try:
            if (await handle.describe()).status is not WorkflowExecutionStatus.RUNNING:
                return None
            state: dict[str, Any] = await handle.query("state")
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return None
            raise
        return state

    async def session_messages(self, session_id: str) -> list[Message]:
        try:
            raw = await self._handle(session_id).query("messages")
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return []
            raise
        return messages_from_json(raw)

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
