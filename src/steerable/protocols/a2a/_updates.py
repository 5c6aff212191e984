"""One turn's native events as A2A task updates (the pure part of the adapter).

``TurnView`` reads the redacted JSON events of a session (the same stream as ``GET
/v1/sessions/{id}/events``) and says what each one means for the task that follows a turn:
a status update while it works (tool calls, tool progress and results, the model's words before
its tool calls, a steering message taken in, sub-agents), an approval or a question (``ctx.ask``)
that waits (``INPUT_REQUIRED``), or the end of the turn (the final text as an artifact, then a
terminal state). Events of other turns of the session are ignored; a sub-turn's events belong to
its parent's task. A turn that parks (its requests wait in the store) is not over: the turn that
resumes it (``resumed_from``) is followed in its place. Every update is built as the SDK's protobuf type, so what is sent has the
protocol's shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Part, TaskState

__all__ = ["Approval", "End", "Progress", "Question", "TurnView", "Update", "answer_value",
           "decision"]

_SHOWN = 2000
"""Characters of a tool's output or a model's text a status message carries."""
_LINE = 160
"""Characters of a tool's output its one-line summary shows."""
_YES = frozenset({"yes", "y", "approve", "approved", "allow", "ok"})
_NO = frozenset({"no", "n", "deny", "denied", "reject"})


@dataclass(frozen=True, slots=True)
class Progress:
    """The task works on: a status message (``WORKING``), tagged with the native event kind."""

    kind: str
    seq: int
    parts: list[Part]


@dataclass(frozen=True, slots=True)
class Approval:
    """A tool call waits for a person: the task is ``INPUT_REQUIRED`` until a message answers."""

    request_id: str
    seq: int
    parts: list[Part]


@dataclass(frozen=True, slots=True)
class Question:
    """A tool asked the person (``ctx.ask``): ``INPUT_REQUIRED`` until a message answers."""

    request_id: str
    seq: int
    parts: list[Part]
    choices: list[str] | None
    schema: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class End:
    """The turn ended: ``state`` is the task's terminal state, ``text`` the final reply."""

    state: TaskState
    status: str
    text: str
    detail: str


Update = Progress | Approval | Question | End


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _plain(value: Any) -> Any:
    """A value a protobuf ``Value`` can hold (tool arguments are JSON already)."""
    return json.loads(json.dumps(value, default=str))


def approval_question(event: dict[str, Any]) -> list[Part]:
    arguments = event.get("arguments", {})
    text = (f"Allow {event['tool_name']} {json.dumps(arguments)}? Answer with a message to this "
            'task: the text "yes" or "no", or a data part {"approved": true|false, '
            '"reason": "..."}.')
    return [new_text_part(text), new_data_part({"approval": {
        "request_id": event["request_id"], "call_id": event["call_id"],
        "tool_name": event["tool_name"], "arguments": _plain(arguments)}})]


def question_parts(event: dict[str, Any]) -> list[Part]:
    choices, schema = event.get("choices"), event.get("schema")
    how = (f"the text of one of {json.dumps(choices)}" if choices is not None
           else f"a data part (or JSON text) that fits the schema {json.dumps(schema)}"
           if schema is not None else "the text of the answer")
    return [new_text_part(f"{event['question']} Answer with a message to this task: {how}."),
            new_data_part({"question": {
                "request_id": event["request_id"], "call_id": event["call_id"],
                "tool_name": event["tool_name"], "question": event["question"],
                "choices": choices, "schema": _plain(schema)}})]


def _state(status: str) -> TaskState:
    if status in ("completed", "max_iterations"):
        return TaskState.TASK_STATE_COMPLETED
    if status == "error":
        return TaskState.TASK_STATE_FAILED
    return TaskState.TASK_STATE_CANCELED  # cancelled, interrupted, aborted: stopped on request


@dataclass
class TurnView:
    """Which events belong to the followed turn, and what they mean for its task."""

    turn_id: str | None
    """The turn followed; None until the message that starts it is delivered."""
    message_id: str | None = None
    """The message whose turn is awaited (a queued one); follows re-runs by ``origin_id``."""
    turns: set[str] = field(default_factory=set)
    """The turn and its sub-turns."""

    def __post_init__(self) -> None:
        if self.turn_id is not None:
            self.turns.add(self.turn_id)

    def feed(self, seq: int, event: dict[str, Any]) -> Update | None:
        kind = str(event.get("kind"))
        if self.turn_id is None:
            return self._message(seq, event) if kind == "message_state" else None
        if kind == "turn_start" and event.get("resumed_from") in self.turns:
            self.turn_id = str(event["turn_id"])  # the parked turn goes on, answered
            self.turns.add(self.turn_id)
            return Progress("turn_resumed", seq, [new_text_part("the turn resumed")])
        if event.get("turn_id") not in self.turns:
            return None
        if kind == "turn_end" and event.get("turn_id") == self.turn_id:
            status = str(event.get("status"))
            if status == "waiting":
                return None  # parked on its requests: a resumed turn follows once answered
            detail = str(event.get("error") or "")
            return End(_state(status), status, str(event.get("text") or ""), detail)
        if kind == "subturn_spawn":
            self.turns.add(event["child_turn_id"])
        if kind == "approval_requested":
            return Approval(event["request_id"], seq, approval_question(event))
        if kind == "question_asked":
            return Question(event["request_id"], seq, question_parts(event),
                            event.get("choices"), event.get("schema"))
        parts = _progress(kind, event)
        return None if parts is None else Progress(kind, seq, parts)

    def _message(self, seq: int, event: dict[str, Any]) -> Update | None:
        if event.get("origin_id") == self.message_id and event.get("state") == "queued":
            self.message_id = event["message_id"]  # handed back by its turn, sent again
            return None
        if event.get("message_id") != self.message_id:
            return None
        state = event.get("state")
        if state == "delivered":
            self.turn_id = str(event["turn_id"])
            self.turns.add(self.turn_id)
            return Progress("turn_start", seq, [new_text_part("the turn started")])
        if state in ("rejected", "revoked"):
            detail = str(event.get("detail") or state)
            return End(TaskState.TASK_STATE_CANCELED if state == "revoked"
                       else TaskState.TASK_STATE_REJECTED, str(state), "", detail)
        return None


def _progress(kind: str, event: dict[str, Any]) -> list[Part] | None:
    """The status message of a working step, None for events that are not one (deltas, state
    changes, requests would drown the client)."""
    if kind == "llm_response":
        text = event.get("text") or ""
        return [new_text_part(_cut(text))] if text and event.get("tool_calls") else None
    if kind == "tool_exec_start":
        arguments = event.get("arguments", {})
        return [new_text_part(f"tool {event['tool_name']} {_cut(json.dumps(arguments))}"),
                new_data_part({"tool_call": {"call_id": event["call_id"],
                                             "tool_name": event["tool_name"],
                                             "arguments": _plain(arguments)}})]
    if kind == "tool_exec_progress":
        if not str(event.get("text") or "").strip():
            return None
        return [new_text_part(f"tool {event['tool_name']}: {_cut(event['text'])}")]
    if kind == "tool_exec_end":
        # The output once in full (the data part) and a short line to show: a task keeps
        # every status message in its history, and the SDK copies the task on each update.
        content = str(event.get("content") or "")
        outcome = "failed" if event.get("is_error") else "done"
        line = " ".join(content[:_LINE].split())
        return [new_text_part(f"tool {event['tool_name']} {outcome}: {line}"),
                new_data_part({"tool_result": {
            "call_id": event["call_id"], "tool_name": event["tool_name"],
            "is_error": bool(event.get("is_error")), "content": _cut(content)}})]
    if kind == "tool_exec_skipped":
        detail = f": {event['detail']}" if event.get("detail") else ""
        return [new_text_part(f"tool {event['tool_name']} not run ({event['reason']}){detail}")]
    if kind == "steering_injected":
        return [new_text_part(f"steered: {_cut(event['text'])}")]
    if kind == "subturn_spawn":
        return [new_text_part(f"sub-agent {event['agent']} started")]
    if kind == "subturn_end":
        return [new_text_part(f"sub-agent ended {event['status']}: {_cut(event['text'])}")]
    if kind == "error":
        return [new_text_part(f"error: {_cut(event['message'])}")]
    return None


def decision(texts: list[str], data: list[Any]) -> tuple[bool, str] | None:
    """The answer to an approval that a message carries: ``(approved, reason)``, or None when
    it carries none. A data part ``{"approved": bool, "reason"?: str}`` wins over the text,
    whose first word must be yes or no (the rest is the reason)."""
    for value in data:
        if isinstance(value, dict) and isinstance(value.get("approved"), bool):
            return value["approved"], str(value.get("reason") or "")
    words = " ".join(texts).strip().split(maxsplit=1)
    if not words:
        return None
    first = words[0].strip(".,!:;").lower()
    if first in _YES or first in _NO:
        return first in _YES, words[1].strip() if len(words) > 1 else ""
    return None


def answer_value(question: Question, texts: list[str], data: list[Any]) -> Any:
    """The answer to a question that a message carries (None: it carries none). With a
    schema, a data part is the value, else the text read as JSON unless the schema asks for
    text; a choice is the text (matched case-blind); otherwise the text. The runner checks it
    against the question (a value that does not fit is refused and the question stays)."""
    text = " ".join(t.strip() for t in texts).strip()
    schema = question.schema
    if schema is not None:
        if data:
            return data[0]
        if not text:
            return None
        if schema.get("type") in (None, "string"):
            return text
        try:
            return json.loads(text)
        except ValueError:
            return text
    if not text:
        return None
    if question.choices is not None:
        return next((c for c in question.choices if c.lower() == text.lower()), text)
    return text
