"""AG-UI interrupts: what a thread waits for, and the answers a resuming run carries.

An interrupt is one request the thread's turn waits on (SPEC 11): an approval of a tool call
(``reason: tool_approval``; the answer ``{"approved": bool, "reason"?: str}``, or the status
``cancelled``, which denies) or a question a tool asked with ``ctx.ask`` (``reason:
input_required``; the answer is the value itself, fitting ``responseSchema``: the question's
schema, its choices, or text). Its id is the request id, so the answer is the same whichever
way it comes (the resume, ``POST /v1/requests/{id}``, ``steerable answer``).

What the run ends on is read from the runner's list of waiting requests (live ones of the
running turn, parked ones in the store), not from memory: the list is the truth after a
restart, and holds the requests of calls that asked in parallel. Answers are checked, all of
them, before any is given: a bad entry refuses the whole resume and records nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import Interrupt
from ag_ui.core.types import ResumeEntry

from steerable._core._requests import check_answer
from steerable.errors import InvalidAnswerError

__all__ = ["APPROVAL_SCHEMA", "Answer", "BadResume", "answers_for", "interrupt_for"]

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}}}


class BadResume(ValueError):
    """Resume entries that cannot be taken as they are (400); nothing was answered."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer to give: ``approved`` for an approval, ``value`` for a question."""

    request_id: str
    approved: bool | None
    value: Any
    reason: str


def _question_schema(req: Mapping[str, Any]) -> dict[str, Any]:
    if req.get("schema") is not None:
        return dict(req["schema"])
    if req.get("choices") is not None:
        return {"type": "string", "enum": list(req["choices"])}
    return {"type": "string"}


def interrupt_for(req: Mapping[str, Any]) -> Interrupt:
    """The interrupt of a waiting request (as ``GET /v1/requests`` lists it)."""
    meta = {"tool_name": req["tool_name"], "session_id": req["session_id"]}
    if req["kind"] == "approval":
        arguments = req.get("arguments") or {}
        return Interrupt(id=req["request_id"], reason="tool_approval",
                         tool_call_id=req["call_id"], response_schema=APPROVAL_SCHEMA,
                         message=f"Allow {req['tool_name']} {json.dumps(arguments)}?",
                         metadata={**meta, "arguments": arguments})
    if req.get("choices") is not None:
        meta["choices"] = list(req["choices"])
    return Interrupt(id=req["request_id"], reason="input_required", tool_call_id=req["call_id"],
                     message=req.get("question") or "", response_schema=_question_schema(req),
                     metadata=meta)


def answers_for(entries: Sequence[ResumeEntry], waiting: Mapping[str, Mapping[str, Any]]
                ) -> list[Answer]:
    """The answers ``entries`` give to the thread's ``waiting`` requests, every one checked,
    or ``BadResume`` saying what is wrong (an unknown or repeated id, a bad answer)."""
    out: list[Answer] = []
    seen: set[str] = set()
    for entry in entries:
        rid = entry.interrupt_id
        req = waiting.get(rid)
        if req is None:
            raise BadResume(f"resume names {rid!r}, which this thread is not waiting on (answered "
                            "already, or never asked)")
        if rid in seen:
            raise BadResume(f"resume answers {rid!r} twice")
        seen.add(rid)
        out.append(_answer(entry, req))
    return out


def _answer(entry: ResumeEntry, req: Mapping[str, Any]) -> Answer:
    rid = entry.interrupt_id
    if req["kind"] == "approval":
        if entry.status == "cancelled":
            return Answer(rid, False, None, "cancelled")
        payload = entry.payload
        if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
            raise BadResume(f"the answer to approval {rid!r} is {{\"approved\": true|false}}")
        reason = payload.get("reason", "")
        if not isinstance(reason, str):
            raise BadResume(f"the reason of approval {rid!r} must be a string")
        approved = payload["approved"]
        return Answer(rid, approved, None, reason or ("" if approved else "denied"))
    if entry.status == "cancelled":
        raise BadResume(f"question {rid!r} cannot be left unanswered: answer it, or cancel the "
                        "turn (POST /v1/sessions/{id}/cancel)")
    try:
        value = check_answer(entry.payload, req.get("choices"), req.get("schema"))
    except InvalidAnswerError as exc:
        raise BadResume(f"question {rid!r}: {exc}") from None
    return Answer(rid, None, value, "")
