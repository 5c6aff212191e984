"""Events: one frozen class per ``EventKind``, all sharing the fields every event has.

Each event records where it happened (``turn_id``, ``parent_turn_id``, ``session_id``), when
(``time``, wall clock seconds) and in what order (``seq``, strictly increasing per loop). The
``kind`` is a class attribute, so ``event.kind`` works on every instance and ``match`` works on
the classes. ``event_to_dict`` gives the JSON form used by the recorder and ``--json``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import field
from typing import Any, ClassVar, Literal

from steerable._messages import ToolCall, Usage, usage_to_dict
from steerable._receipts import MessageState
from steerable._records import Record, record

__all__ = [
    "ApprovalRequested",
    "ApprovalResolved",
    "CompressReason",
    "ContextCompress",
    "ErrorEvent",
    "ErrorSource",
    "Event",
    "EventKind",
    "FollowUpQueued",
    "InterruptMode",
    "InterruptReceived",
    "LLMDelta",
    "LLMRequestEvent",
    "LLMResponseEvent",
    "LLMRetry",
    "MessageStateEvent",
    "QuestionAnswered",
    "QuestionAsked",
    "SessionSummarize",
    "SkipReason",
    "StateChanged",
    "SteeringInjected",
    "SubturnEnd",
    "SubturnOrphan",
    "SubturnResultDelivered",
    "SubturnSpawn",
    "ToolCallDelta",
    "ToolExecEnd",
    "ToolExecProgress",
    "ToolExecSkipped",
    "ToolExecStart",
    "TurnEnd",
    "TurnPhase",
    "TurnStart",
    "TurnStatus",
    "event_to_dict",
]


class EventKind(enum.StrEnum):
    TURN_START = "turn_start"
    TURN_END = "turn_end"
    STATE_CHANGED = "state_changed"
    LLM_REQUEST = "llm_request"
    LLM_DELTA = "llm_delta"
    LLM_RESPONSE = "llm_response"
    LLM_RETRY = "llm_retry"
    TOOL_CALL_DELTA = "tool_call_delta"
    TOOL_EXEC_START = "tool_exec_start"
    TOOL_EXEC_PROGRESS = "tool_exec_progress"
    TOOL_EXEC_END = "tool_exec_end"
    TOOL_EXEC_SKIPPED = "tool_exec_skipped"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_RESOLVED = "approval_resolved"
    STEERING_INJECTED = "steering_injected"
    FOLLOW_UP_QUEUED = "follow_up_queued"
    INTERRUPT_RECEIVED = "interrupt_received"
    CONTEXT_COMPRESS = "context_compress"
    SESSION_SUMMARIZE = "session_summarize"
    SUBTURN_SPAWN = "subturn_spawn"
    SUBTURN_END = "subturn_end"
    SUBTURN_RESULT_DELIVERED = "subturn_result_delivered"
    SUBTURN_ORPHAN = "subturn_orphan"
    ERROR = "error"
    MESSAGE_STATE = "message_state"
    PLAN_UPDATED = "plan_updated"
    QUESTION_ASKED = "question_asked"
    QUESTION_ANSWERED = "question_answered"


class TurnStatus(enum.StrEnum):
    """How a turn ended."""

    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"
    ERROR = "error"
    MAX_ITERATIONS = "max_iterations"
    CANCELLED = "cancelled"
    """Stopped at a safe point by a cancel (``AFTER_MODEL``/``AFTER_TOOLS``); its checkpoint
    is kept and ``AgentLoop.resume`` continues it."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """A ``Limits`` budget (tokens, cost, tool calls) was reached: the turn ended as a graceful
    interrupt does, with one summary call and no more tools."""
    WAITING = "waiting"
    """Parked: an approval or a question is open (``TurnResult.pending``); its checkpoint is
    kept and answering the last open request (``AgentLoop.answer``/``resolve_approval``, on
    any loop over the same store) resumes it."""


SkipReason = Literal["interrupted", "steering", "denied", "aborted", "max_iterations",
                     "cancelled", "budget"]
"""Why a declared tool call did not run (``ToolExecSkipped.reason``); plain strings on the wire."""

InterruptMode = Literal["graceful", "hard", "abort_turn", "cancel_after_model",
                        "cancel_after_tools", "budget"]
"""What stopped a turn early (``InterruptReceived.mode``); ``abort_turn`` is a hook's ABORT_TURN,
``cancel_*`` a safe-point ``AgentLoop.cancel``, ``budget`` a ``Limits`` budget reached."""

CompressReason = Literal["overflow", "estimate"]
"""Why the context was compressed: the provider said it overflowed, or the estimate did."""

ErrorSource = Literal["checkpoint", "hook", "observer", "queue", "store", "summarize", "turn"]
"""What failed, in an ERROR event: a hook (interceptor or approver), an ``on_event`` observer,
a full steering or follow-up queue, a turn checkpoint's write, the session store, background summarisation, or the turn
itself (an exception in user code or the engine)."""


class TurnPhase(enum.StrEnum):
    """Where a turn is in its state machine (see ``steerable._core._turn_state``)."""

    IDLE = "idle"
    THINKING = "thinking"
    EXECUTING = "executing"
    COMPACTING = "compacting"
    ABORTING = "aborting"
    DONE = "done"
    ERROR = "error"


@record
class _Event(Record):
    """The fields every event has."""

    kind: ClassVar[EventKind]
    turn_id: str
    """The turn this event belongs to."""
    parent_turn_id: str | None
    """The spawning turn for a sub-turn's events; None at top level."""
    session_id: str
    seq: int
    """Strictly increasing per AgentLoop, across all turns and sessions."""
    time: float
    """Wall-clock time (``time.time()``) when the event was emitted."""


@record
class TurnStart(_Event):
    """A turn began (its input and agent)."""

    kind: ClassVar[Literal[EventKind.TURN_START]] = EventKind.TURN_START
    input: str
    agent: str
    resumed_from: str | None = None
    """For a resumed turn: the id of the turn whose checkpoint it continues."""


@record
class TurnEnd(_Event):
    """A turn ended: how, its final text, iterations and usage."""

    kind: ClassVar[Literal[EventKind.TURN_END]] = EventKind.TURN_END
    status: TurnStatus
    text: str
    iterations: int
    error: str | None = None
    duration: float = 0.0
    """Seconds from TURN_START to TURN_END."""
    usage: Usage | None = None
    """Tokens (and cost, where the model's price is known) of every LLM call of the turn, its
    sub-turns' included, when the provider reported them."""
    cancel_mode: str | None = None
    """The cancel mode that ended the turn (``immediate``, ``after_model``, ``after_tools``),
    None when no cancel did."""


@record
class StateChanged(_Event):
    """The turn's phase changed."""

    kind: ClassVar[Literal[EventKind.STATE_CHANGED]] = EventKind.STATE_CHANGED
    old: TurnPhase
    new: TurnPhase


@record
class LLMRequestEvent(_Event):
    """A model call is about to be made."""

    kind: ClassVar[Literal[EventKind.LLM_REQUEST]] = EventKind.LLM_REQUEST
    iteration: int
    model: str | None
    message_count: int
    tools: tuple[str, ...]
    """Names of the tools offered; empty on a call that must answer in text."""
    tool_choice: Literal["auto", "none", "required"] = "auto"
    """Whether a call is optional, not allowed, or required (``ToolChoice.mode``)."""
    may_call: tuple[str, ...] | None = None
    """The tools the model may call, when fewer than ``tools`` (``ToolChoice.only``)."""
    reason: str = ""
    """Why the model may do what it may (``ToolChoice.reason``, set by a policy hook)."""
    purpose: str = ""
    """Empty for the turn's own calls; a hook's own call (``ctx.ask``) names its purpose."""


@record
class LLMDelta(_Event):
    """A piece of streamed model text."""

    kind: ClassVar[Literal[EventKind.LLM_DELTA]] = EventKind.LLM_DELTA
    iteration: int
    text: str
    thinking: bool = False
    """True for reasoning text the provider streams separately from the answer."""


@record
class LLMResponseEvent(_Event):
    """A model call finished: its text and tool calls."""

    kind: ClassVar[Literal[EventKind.LLM_RESPONSE]] = EventKind.LLM_RESPONSE
    iteration: int
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage | None = None
    finish_reason: str | None = None
    duration: float = 0.0
    purpose: str = ""
    """Empty for the turn's own calls; a hook's own call (``ctx.ask``) names its purpose."""


@record
class LLMRetry(_Event):
    """A model call failed and will be retried after a delay."""

    kind: ClassVar[Literal[EventKind.LLM_RETRY]] = EventKind.LLM_RETRY
    iteration: int
    attempt: int
    """The attempt about to be made (2 for the first retry)."""
    reason: str
    delay: float


@record
class ToolCallDelta(_Event):
    """A piece of a tool call's arguments while the model writes it (raw JSON text; the
    pieces of one call, joined, are its arguments as the model wrote them). The parsed call
    comes whole in ``LLM_RESPONSE``; a call whose provider sends it whole has no deltas."""

    kind: ClassVar[Literal[EventKind.TOOL_CALL_DELTA]] = EventKind.TOOL_CALL_DELTA
    iteration: int
    call_index: int
    """The call's position in the reply (0 for the first call)."""
    tool_name: str
    arguments_delta: str


@record
class ToolExecStart(_Event):
    """A tool call started."""

    kind: ClassVar[Literal[EventKind.TOOL_EXEC_START]] = EventKind.TOOL_EXEC_START
    iteration: int
    call_id: str
    tool_name: str
    arguments: Mapping[str, Any]


@record
class ToolExecProgress(_Event):
    """A running tool reported progress."""

    kind: ClassVar[Literal[EventKind.TOOL_EXEC_PROGRESS]] = EventKind.TOOL_EXEC_PROGRESS
    call_id: str
    tool_name: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)


@record
class ToolExecEnd(_Event):
    """A tool call finished (its result text, or an error)."""

    kind: ClassVar[Literal[EventKind.TOOL_EXEC_END]] = EventKind.TOOL_EXEC_END
    call_id: str
    tool_name: str
    is_error: bool
    content: str
    """The result text the model will read."""
    duration: float = 0.0


@record
class ToolExecSkipped(_Event):
    """A declared tool call did not run, and why."""

    kind: ClassVar[Literal[EventKind.TOOL_EXEC_SKIPPED]] = EventKind.TOOL_EXEC_SKIPPED
    call_id: str
    tool_name: str
    reason: SkipReason
    """``interrupted``, ``steering``, ``denied``, ``aborted`` or ``max_iterations``."""
    detail: str = ""
    """Why, in words (for ``denied``: the approver's or rule's reason)."""


@record
class ApprovalRequested(_Event):
    """A tool call waits for an approver's answer."""

    kind: ClassVar[Literal[EventKind.APPROVAL_REQUESTED]] = EventKind.APPROVAL_REQUESTED
    request_id: str
    call_id: str
    tool_name: str
    arguments: Mapping[str, Any]


@record
class ApprovalResolved(_Event):
    """An approver answered a tool call's approval request."""

    kind: ClassVar[Literal[EventKind.APPROVAL_RESOLVED]] = EventKind.APPROVAL_RESOLVED
    request_id: str
    call_id: str
    tool_name: str
    approved: bool
    reason: str = ""


@record
class QuestionAsked(_Event):
    """A tool asked the person a question (``ToolContext.ask``); ``AgentLoop.answer`` answers."""

    kind: ClassVar[Literal[EventKind.QUESTION_ASKED]] = EventKind.QUESTION_ASKED
    request_id: str
    call_id: str
    tool_name: str
    question: str
    choices: tuple[str, ...] | None = None
    """The answers allowed (None: free text, or what ``schema`` allows)."""
    schema: Mapping[str, Any] | None = None
    """A JSON schema the answer must satisfy (None: any string)."""


@record
class QuestionAnswered(_Event):
    """A question was closed: ``answered`` (``value`` holds the answer), or ``timed out`` /
    ``cancelled`` (live questions only; a parked one waits as long as it takes)."""

    kind: ClassVar[Literal[EventKind.QUESTION_ANSWERED]] = EventKind.QUESTION_ANSWERED
    request_id: str
    call_id: str
    tool_name: str
    value: Any = None
    outcome: str = "answered"


@record
class SteeringInjected(_Event):
    """A steering message entered the running turn."""

    kind: ClassVar[Literal[EventKind.STEERING_INJECTED]] = EventKind.STEERING_INJECTED
    text: str


@record
class FollowUpQueued(_Event):
    """A follow-up message was queued for after the turn."""

    kind: ClassVar[Literal[EventKind.FOLLOW_UP_QUEUED]] = EventKind.FOLLOW_UP_QUEUED
    text: str


@record
class MessageStateEvent(_Event):
    """A message given to the loop changed state (SPEC 10): accepted (``queued``), edited
    (``queued`` again, ``detail`` says so), or one terminal state."""

    kind: ClassVar[Literal[EventKind.MESSAGE_STATE]] = EventKind.MESSAGE_STATE
    message_id: str
    state: MessageState
    detail: str = ""
    """Why, or where: the reason of a refusal, the LLM request that delivered it."""
    message_kind: str = ""
    """``steer``, ``follow_up`` or ``send``."""
    text: str = ""
    origin_id: str | None = None
    """The message this one re-runs (a follow-up its turn handed back)."""
    request_seq: int | None = None
    """For ``delivered``: the ``seq`` of the ``LLM_REQUEST`` whose context carried it."""


@record
class InterruptReceived(_Event):
    """The turn was asked to stop early."""

    kind: ClassVar[Literal[EventKind.INTERRUPT_RECEIVED]] = EventKind.INTERRUPT_RECEIVED
    mode: InterruptMode
    """``graceful``, ``hard`` (also for ``cancel(mode=IMMEDIATE)``), ``abort_turn`` (a hook's
    ABORT_TURN), ``cancel_after_model`` or ``cancel_after_tools`` (``AgentLoop.cancel``)."""
    hint: str | None = None


@record
class ContextCompress(_Event):
    """The turn's context was compressed."""

    kind: ClassVar[Literal[EventKind.CONTEXT_COMPRESS]] = EventKind.CONTEXT_COMPRESS
    reason: CompressReason
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int


@record
class SessionSummarize(_Event):
    """Older session history was summarised."""

    kind: ClassVar[Literal[EventKind.SESSION_SUMMARIZE]] = EventKind.SESSION_SUMMARIZE
    messages_summarized: int
    summary: str


@record
class SubturnSpawn(_Event):
    """A sub-turn was started on this turn's behalf."""

    kind: ClassVar[Literal[EventKind.SUBTURN_SPAWN]] = EventKind.SUBTURN_SPAWN
    child_turn_id: str
    agent: str
    is_async: bool


@record
class SubturnEnd(_Event):
    """A sub-turn ended."""

    kind: ClassVar[Literal[EventKind.SUBTURN_END]] = EventKind.SUBTURN_END
    child_turn_id: str
    status: TurnStatus
    text: str


@record
class SubturnResultDelivered(_Event):
    """An async sub-turn's result was delivered to this turn."""

    kind: ClassVar[Literal[EventKind.SUBTURN_RESULT_DELIVERED]] = EventKind.SUBTURN_RESULT_DELIVERED
    child_turn_id: str
    text: str


@record
class SubturnOrphan(_Event):
    """An async sub-turn's result had no turn left to deliver to."""

    kind: ClassVar[Literal[EventKind.SUBTURN_ORPHAN]] = EventKind.SUBTURN_ORPHAN
    child_turn_id: str
    text: str


@record
class PlanUpdated(_Event):
    """The agent's plan changed (the coding agent's ``todo`` tool): the whole list, in order."""

    kind: ClassVar[Literal[EventKind.PLAN_UPDATED]] = EventKind.PLAN_UPDATED
    call_id: str
    items: tuple[Mapping[str, str], ...]
    """Each ``{"content": ..., "status": "pending" | "in_progress" | "done"}``."""


@record
class ErrorEvent(_Event):
    """Something failed; the turn may go on (see ``source``)."""

    kind: ClassVar[Literal[EventKind.ERROR]] = EventKind.ERROR
    message: str
    source: ErrorSource
    """What failed (see ``ErrorSource``)."""


Event = (
    TurnStart
    | TurnEnd
    | StateChanged
    | LLMRequestEvent
    | LLMDelta
    | LLMResponseEvent
    | LLMRetry
    | ToolCallDelta
    | ToolExecStart
    | ToolExecProgress
    | ToolExecEnd
    | ToolExecSkipped
    | ApprovalRequested
    | ApprovalResolved
    | QuestionAsked
    | QuestionAnswered
    | SteeringInjected
    | FollowUpQueued
    | InterruptReceived
    | ContextCompress
    | SessionSummarize
    | SubturnSpawn
    | SubturnEnd
    | SubturnResultDelivered
    | SubturnOrphan
    | PlanUpdated
    | ErrorEvent
    | MessageStateEvent
)

EVENT_CLASSES: Mapping[EventKind, type[Event]] = {
    cls.kind: cls
    for cls in (
        TurnStart, TurnEnd, StateChanged, LLMRequestEvent, LLMDelta, LLMResponseEvent, LLMRetry,
        ToolCallDelta, ToolExecStart, ToolExecProgress, ToolExecEnd, ToolExecSkipped,
        ApprovalRequested, ApprovalResolved, SteeringInjected, FollowUpQueued, InterruptReceived, ContextCompress,
        SessionSummarize, SubturnSpawn, SubturnEnd, SubturnResultDelivered, SubturnOrphan,
        ErrorEvent, MessageStateEvent, PlanUpdated, QuestionAsked, QuestionAnswered,
    )
}  # fmt: skip


_PLAIN = frozenset({str, int, float, bool})


def _jsonable(value: Any) -> Any:
    # Plain values first: nearly every field is one (an enum member is not: its type differs).
    if value is None or type(value) in _PLAIN:
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, ToolCall):
        out: dict[str, Any] = {"id": value.id, "name": value.name,
                               "arguments": _jsonable(value.arguments)}
        if value.arguments_error:
            out["arguments_error"] = value.arguments_error
        return out
    if isinstance(value, Usage):
        return usage_to_dict(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def event_to_dict(event: Event) -> dict[str, Any]:
    """The JSON form of an event: ``kind`` first, then every field."""
    out: dict[str, Any] = {"kind": event.kind.value}
    plain = _PLAIN
    for name in event._names:  # the fields, in order (dataclasses.fields builds them anew)
        value = getattr(event, name)
        out[name] = value if value is None or type(value) in plain else _jsonable(value)
    return out
