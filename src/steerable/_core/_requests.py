"""Requests a turn makes of a person: approvals and questions, their ids, and their answers.

A request id is the only thing an answer needs, so it is a capability: 128 random bits from
``secrets`` (never a counter, never a clock), so two processes (Redis workers, a CLI and a
server over one store) never hand out the same id, and nobody who did not see the request
(a web page guessing ids) can answer it. ``new_request_id`` is the one place ids are made.

``RequestTable`` is the loop-wide table of requests open *in this process* (a live wait: a
future the asking code awaits). A parked request lives in its turn's checkpoint and the
store's index of waiting requests instead (``_parking``); the table only holds it while its
turn is still running.

``check_answer`` is the one validation of an answer, used before anything is recorded: a value
outside ``choices`` or failing ``schema`` is refused with ``InvalidAnswerError`` and the
question stays open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal

from steerable._ids import random_hex
from steerable._records import Record, record, state
from steerable.errors import InvalidAnswerError, RequestClosedError, ToolError

__all__ = ["LiveRequest", "PendingRequest", "RequestKind", "RequestTable", "check_answer",
           "check_question", "new_request_id", "request_from_record", "request_to_record"]

RequestKind = Literal["approval", "question"]


def new_request_id(kind: RequestKind) -> str:
    """A fresh, unguessable request id: the kind, then 128 random bits (32 hex digits) from the
    one id source (``os.urandom``; a durable engine that replays sessions substitutes its own)."""
    return f"{kind}_{random_hex(16)}"


@record
class PendingRequest(Record):
    """An approval or a question a parked turn waits for (``TurnResult.pending``,
    ``AgentLoop.pending_requests``); also how its checkpoint records it, with the answer once
    one came (``answered``) so that a tool re-run on resume gets it back from ``ctx.ask``."""

    request_id: str
    kind: RequestKind
    session_id: str
    turn_id: str
    """The turn that asked (the checkpoint's ``origin_turn_id``: stable across resumes)."""
    call_id: str
    tool_name: str
    question: str = ""
    """For a question: what the tool asked."""
    choices: tuple[str, ...] | None = None
    schema: Mapping[str, Any] | None = None
    arguments: Mapping[str, Any] | None = None
    """For an approval: the call's arguments, as the approver saw them."""
    index: int = 0
    """For a question: which ``ask`` of its call this is (0 first): replay order on resume."""
    answered: bool = False
    value: Any = None
    """The answer: a question's value, or an approval's ``approved`` (a bool)."""
    reason: str = ""
    """An approval's reason (for a denial: shown to the model)."""
    created: float = 0.0


def request_to_record(req: PendingRequest) -> dict[str, Any]:
    """The JSON object of a request (inside a checkpoint record, or a store's index)."""
    out: dict[str, Any] = {"id": req.request_id, "kind": req.kind, "session_id": req.session_id,
                           "turn_id": req.turn_id, "call_id": req.call_id,
                           "tool_name": req.tool_name, "created": req.created}
    if req.kind == "question":
        out["question"], out["index"] = req.question, req.index
        if req.choices is not None:
            out["choices"] = list(req.choices)
        if req.schema is not None:
            out["schema"] = dict(req.schema)
    elif req.arguments is not None:
        out["arguments"] = dict(req.arguments)
    if req.answered:
        out["answer"] = {"value": req.value, "reason": req.reason}
    return out


def request_from_record(raw: Mapping[str, Any]) -> PendingRequest:
    """The request a JSON object describes (``ValueError``/``KeyError`` when it is not one)."""
    kind = raw["kind"]
    if kind not in ("approval", "question"):
        raise ValueError(f"unknown request kind {kind!r}")
    answer = raw.get("answer")
    choices = raw.get("choices")
    return PendingRequest(
        request_id=str(raw["id"]), kind=kind, session_id=str(raw["session_id"]),
        turn_id=str(raw["turn_id"]), call_id=str(raw["call_id"]),
        tool_name=str(raw["tool_name"]), question=str(raw.get("question", "")),
        choices=None if choices is None else tuple(str(c) for c in choices),
        schema=raw.get("schema"), arguments=raw.get("arguments"),
        index=int(raw.get("index", 0)), answered=isinstance(answer, Mapping),
        value=answer.get("value") if isinstance(answer, Mapping) else None,
        reason=str(answer.get("reason", "")) if isinstance(answer, Mapping) else "",
        created=float(raw.get("created", 0.0)))


def check_question(question: object, choices: object, schema: object
                   ) -> tuple[str, tuple[str, ...] | None, dict[str, Any] | None]:
    """Check what a tool asks (a bug in the tool is a ``ToolError`` the model reads)."""
    if not isinstance(question, str) or not question.strip():
        raise ToolError("ctx.ask needs a non-empty question (a str)")
    if choices is not None:
        if isinstance(choices, str) or not isinstance(choices, Sequence) or not choices \
                or not all(isinstance(c, str) for c in choices):
            raise ToolError("ctx.ask: choices must be a non-empty list of strings")
        choices = tuple(choices)
    if schema is not None:
        if not isinstance(schema, Mapping):
            raise ToolError("ctx.ask: schema must be a JSON schema (a dict)")
        import jsonschema  # deferred: `import steerable` stays fast

        try:
            jsonschema.Draft202012Validator.check_schema(schema)
            json.dumps(schema)
        except (jsonschema.SchemaError, TypeError, ValueError) as exc:
            raise ToolError(f"ctx.ask: schema is not a valid JSON schema: {exc}") from None
        schema = dict(schema)
    return question, choices, schema


def check_answer(value: Any, choices: Sequence[str] | None,
                 schema: Mapping[str, Any] | None) -> Any:
    """The answer as recorded, or ``InvalidAnswerError`` saying what fits."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise InvalidAnswerError(
            f"an answer must be JSON data (str, number, bool, list, dict), got "
            f"{type(value).__name__}") from None
    if choices is not None and value not in choices:
        raise InvalidAnswerError(
            f"{value!r} is not one of the choices {list(choices)}; answer with one of them")
    if schema is not None:
        import jsonschema

        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value),
                        key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path)
            raise InvalidAnswerError(
                f"the answer does not fit the question's schema"
                f"{f' at {where}' if where else ''}: {errors[0].message}")
    elif choices is None and not isinstance(value, str):
        raise InvalidAnswerError(
            f"this question takes a text answer (a str), got {type(value).__name__}")
    return value


@state(eq=False)
class LiveRequest:
    """A request open in this process: the future its asker awaits."""

    request_id: str
    kind: RequestKind
    future: asyncio.Future[Any]
    choices: tuple[str, ...] | None = None
    schema: dict[str, Any] | None = None
    parked: bool = False
    """Its turn decided to park it: an answer now is kept for the checkpoint (``late``)."""
    late: list[Any] = field(default_factory=list)


class RequestTable:
    """The requests open in this process, by id (approvals and questions alike)."""

    def __init__(self) -> None:
        self._open: dict[str, LiveRequest] = {}

    def open(self, kind: RequestKind, *, choices: tuple[str, ...] | None = None,
             schema: dict[str, Any] | None = None) -> LiveRequest:
        req = LiveRequest(new_request_id(kind), kind,
                          asyncio.get_running_loop().create_future(), choices, schema)
        self._open[req.request_id] = req
        return req

    def get(self, request_id: str) -> LiveRequest | None:
        return self._open.get(request_id)

    def discard(self, request_id: str) -> None:
        self._open.pop(request_id, None)

    def resolve(self, request_id: str, approved: bool, reason: str) -> bool:
        """Answer an open approval; False when this process has no such live request."""
        req = self._open.get(request_id)
        if req is None or req.kind != "approval":
            return False
        return self._settle(req, (approved, reason))

    def answer(self, request_id: str, value: Any) -> bool:
        """Answer an open question (validated: ``InvalidAnswerError`` leaves it open)."""
        req = self._open.get(request_id)
        if req is None or req.kind != "question":
            return False
        return self._settle(req, check_answer(value, req.choices, req.schema))

    def _settle(self, req: LiveRequest, answer: Any) -> bool:
        if req.parked:  # its turn is writing the checkpoint that parks it: answer it there
            if req.late:
                raise RequestClosedError(f"request {req.request_id} was answered already")
            req.late.append(answer)
            return True
        # Only here is a future set, as its entry leaves the table: an open one is never done.
        del self._open[req.request_id]
        req.future.set_result(answer)
        return True
