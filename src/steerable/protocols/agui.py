"""AG-UI 1.0 (SPEC 12): ``POST /v1/agui`` takes a ``RunAgentInput`` and streams AG-UI events.

A thread is a session (``threadId``), a run follows one turn. The native events of the turn,
read from the same redacted stream as ``GET /v1/sessions/{id}/events``, map to AG-UI's:

- model text: ``TEXT_MESSAGE_START/CONTENT/END``; thinking: ``REASONING_START``,
  ``REASONING_MESSAGE_START/CONTENT/END``, ``REASONING_END``;
- the model's tool calls: ``TOOL_CALL_START/ARGS/END``; their results: ``TOOL_CALL_RESULT``;
  a call that did not run (denied, interrupted...) gets a ``TOOL_CALL_RESULT`` saying so; a tool
  at work: ``ACTIVITY_SNAPSHOT`` (running) then ``ACTIVITY_DELTA`` (progress, outcome);
- a sub-turn (a sub-agent): ``STEP_STARTED``/``STEP_FINISHED``, its own events in between;
- a steering message taken in (sent through ``POST /v1/sessions/{id}/steer``): ``CUSTOM``
  named ``steering``;
- a tool call waiting for approval: the run ends with ``RUN_FINISHED`` whose outcome is an
  ``interrupt`` (id = the approval request id); the turn keeps waiting, and the next run of the
  thread with ``resume: [{interruptId, status, payload: {approved, reason?}}]`` answers it and
  goes on streaming the same turn (``status: cancelled`` denies);
- the end of the turn: ``RUN_FINISHED`` (``success``, with the final text as ``result``, or
  ``cancelled``) or ``RUN_ERROR``.

Every event is built as the ``ag_ui.core`` model of its type (the ``agui`` extra), so what is
sent has passed the package's validation.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from steerable.drivers._lanes import BusyPolicy
from steerable.errors import SteerableError

__all__ = ["MAX_INPUT", "RunTranslator", "Runner", "agui_route", "parse_input"]

MAX_INPUT = 1 << 20
"""Bytes a ``RunAgentInput`` may have (it carries the client's copy of the conversation)."""
_PENDING = 4096
"""Open interrupts remembered for a resume; past that the oldest are forgotten (their turns
time out waiting, as an unanswered approval does)."""
_THREAD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class _Sent(Protocol):
    @property
    def turn_id(self) -> str | None: ...


class Runner(Protocol):
    """What the endpoint calls: a subset of ``steerable.server.SessionRunner``."""

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None) -> _Sent: ...

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool: ...

    def events(self, session_id: str, after: int | None) -> AsyncIterator[tuple[int, str]]: ...


class BadInput(ValueError):
    """A request that cannot start or resume a run (400)."""


def parse_input(raw: bytes) -> RunAgentInput:
    try:
        run = RunAgentInput.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"not a RunAgentInput: {where}: {first['msg']}") from None
    if not _THREAD.match(run.thread_id):
        raise BadInput("threadId must be 1-128 letters, digits, '.', '_' or '-', starting with "
                       "a letter or digit (it is the session id)")
    return run


def _prompt(run: RunAgentInput) -> str:
    """The text of the last user message: the rest of the conversation is the session's own."""
    for message in reversed(run.messages):
        if isinstance(message, UserMessage):
            content = message.content
            text = content if isinstance(content, str) else "\n".join(
                part.text for part in content if isinstance(part, TextPart))
            if text.strip():
                return text
    raise BadInput("a run needs a user message with text (or resume entries)")


@dataclass
class RunTranslator:
    """Native events of one turn in, AG-UI events out; ``finished`` once the run is over."""

    thread_id: str
    run_id: str
    turn_id: str | None
    """The turn this run follows; None: the first top-level turn seen (a resumed run)."""
    interrupts: dict[str, int] = field(default_factory=dict)
    """Approval ids this run ended on -> the seq of their request (a resume starts after it)."""
    finished: bool = False
    _text: str | None = None
    _reasoning: str | None = None
    _steps: dict[str, str] = field(default_factory=dict)

    def feed(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        kind = event.get("kind")
        turn = event.get("turn_id")
        top = event.get("parent_turn_id") is None
        if self.turn_id is None and top and kind != "turn_end":
            self.turn_id = turn
        if kind == "turn_end" and top and turn == self.turn_id:
            return self._end(event)
        handler = _HANDLERS.get(str(kind))
        return handler(self, seq, event) if handler is not None else []

    def _close(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._text is not None:
            out.append(TextMessageEndEvent(message_id=self._text))
            self._text = None
        if self._reasoning is not None:
            out += [ReasoningMessageEndEvent(message_id=self._reasoning),
                    ReasoningEndEvent(message_id=self._reasoning)]
            self._reasoning = None
        return out

    def _delta(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        text = event.get("text") or ""
        if not text:
            return []
        base = f"{event['turn_id']}-{event['iteration']}"
        out: list[BaseEvent] = []
        if event.get("thinking"):
            if self._reasoning is None:
                out += self._close()
                self._reasoning = base + "-reasoning"
                out += [ReasoningStartEvent(message_id=self._reasoning),
                        ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning")]
            return [*out, ReasoningMessageContentEvent(message_id=self._reasoning, delta=text)]
        if self._text is None:
            out += self._close()
            self._text = base
            out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
        return [*out, TextMessageContentEvent(message_id=self._text, delta=text)]

    def _response(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        parent = self._text
        out = self._close()
        for call in event.get("tool_calls") or []:
            out += [ToolCallStartEvent(tool_call_id=call["id"], tool_call_name=call["name"],
                                       parent_message_id=parent),
                    ToolCallArgsEvent(tool_call_id=call["id"],
                                      delta=json.dumps(call.get("arguments", {}))),
                    ToolCallEndEvent(tool_call_id=call["id"])]
        return out

    def _tool_start(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        return [ActivitySnapshotEvent(
            message_id=f"activity-{event['call_id']}", activity_type="tool",
            content={"tool": event["tool_name"], "status": "running", "progress": ""})]

    def _tool_progress(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        return [_activity(event["call_id"], "/progress", event["text"])]

    def _tool_end(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        status = "failed" if event.get("is_error") else "done"
        return [ToolCallResultEvent(message_id=f"result-{event['call_id']}",
                                    tool_call_id=event["call_id"],
                                    content=event.get("content") or "", role="tool"),
                _activity(event["call_id"], "/status", status)]

    def _tool_skipped(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        # The call was announced with TOOL_CALL_START: a client waits for its result.
        detail = f": {event['detail']}" if event.get("detail") else ""
        return [ToolCallResultEvent(message_id=f"result-{event['call_id']}",
                                    tool_call_id=event["call_id"], role="tool",
                                    content=f"not run ({event['reason']}){detail}")]

    def _approval(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        self.interrupts[event["request_id"]] = seq
        self.finished = True
        arguments = json.dumps(event.get("arguments", {}))
        interrupt = Interrupt(
            id=event["request_id"], reason="tool_approval", tool_call_id=event["call_id"],
            message=f"Allow {event['tool_name']} {arguments}?",
            response_schema={"type": "object", "required": ["approved"], "properties": {
                "approved": {"type": "boolean"}, "reason": {"type": "string"}}},
            metadata={"tool_name": event["tool_name"], "arguments": event.get("arguments", {})})
        return [*self._close(), RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id,
            outcome=RunFinishedInterruptOutcome(type="interrupt", interrupts=[interrupt]))]

    def _steering(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        return [CustomEvent(name="steering", value={"text": event["text"]})]

    def _spawn(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        name = f"{event['agent']} ({event['child_turn_id']})"
        self._steps[event["child_turn_id"]] = name
        return [*self._close(), StepStartedEvent(step_name=name)]

    def _subturn_end(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        name = self._steps.pop(event["child_turn_id"], None)
        return [] if name is None else [*self._close(), StepFinishedEvent(step_name=name)]

    def _end(self, event: dict[str, Any]) -> list[BaseEvent]:
        self.finished = True
        out = self._close()
        status = event.get("status")
        if status == "error":
            return [*out, RunErrorEvent(message=event.get("error") or "the turn failed",
                                        code="turn_error")]
        outcome: RunFinishedSuccessOutcome | RunFinishedCancelledOutcome = (
            RunFinishedSuccessOutcome(type="success")
            if status in ("completed", "max_iterations")
            else RunFinishedCancelledOutcome(type="cancelled"))
        return [*out, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                       result=event.get("text") or "", outcome=outcome)]


def _activity(call_id: str, path: str, value: str) -> ActivityDeltaEvent:
    # Validated from the wire form: the JSON Patch operation models are not exported.
    return ActivityDeltaEvent.model_validate({
        "type": "ACTIVITY_DELTA", "messageId": f"activity-{call_id}", "activityType": "tool",
        "patch": [{"op": "replace", "path": path, "value": value}]})


_HANDLERS = {
    "llm_delta": RunTranslator._delta, "llm_response": RunTranslator._response,
    "tool_exec_start": RunTranslator._tool_start,
    "tool_exec_progress": RunTranslator._tool_progress,
    "tool_exec_end": RunTranslator._tool_end, "tool_exec_skipped": RunTranslator._tool_skipped,
    "approval_requested": RunTranslator._approval,
    "steering_injected": RunTranslator._steering, "subturn_spawn": RunTranslator._spawn,
    "subturn_end": RunTranslator._subturn_end,
}


class _Endpoint:
    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.pending: dict[str, tuple[str, int]] = {}
        """Open interrupts: approval id -> (thread, seq of the request), for the resume."""

    async def __call__(self, request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_INPUT):
            return JSONResponse({"error": f"body larger than {MAX_INPUT} bytes"}, 413)
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_INPUT:
                return JSONResponse({"error": f"body larger than {MAX_INPUT} bytes"}, 413)
        try:
            run = parse_input(bytes(raw))
            events, translator, start = await self._begin(run)
        except (BadInput, LookupError) as exc:
            return JSONResponse({"error": str(exc.args[0])}, 400)
        except (ValueError, SteerableError, ConnectionError) as exc:
            return JSONResponse({"error": str(exc)}, 409)
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        return StreamingResponse(self._stream(events, translator, start, encoder),
                                 media_type=encoder.get_content_type(),
                                 headers={"Cache-Control": "no-store"})

    async def _begin(self, run: RunAgentInput
                     ) -> tuple[AsyncIterator[tuple[int, str]], RunTranslator, list[BaseEvent]]:
        sid = run.thread_id
        start: list[BaseEvent] = [RunStartedEvent(thread_id=sid, run_id=run.run_id,
                                                  parent_run_id=run.parent_run_id)]
        if run.resume:
            entries = [(e, self.pending.get(e.interrupt_id)) for e in run.resume]
            known = [(e, p) for e, p in entries if p is not None and p[0] == sid]
            if len(known) != len(entries):
                raise BadInput("resume names an interrupt this thread is not waiting on")
            after = min(seq for _, (_, seq) in known)
            events = self.runner.events(sid, after)  # attached before the turn moves on
            for entry, _ in known:
                payload = entry.payload if isinstance(entry.payload, dict) else {}
                approved = entry.status == "resolved" and payload.get("approved") is True
                reason = str(payload.get("reason") or ("" if approved else "denied"))
                self.pending.pop(entry.interrupt_id, None)
                await self.runner.resolve_approval(entry.interrupt_id, approved, reason)
            return events, RunTranslator(sid, run.run_id, None), start
        prompt = _prompt(run)
        events = self.runner.events(sid, None)  # attached before the turn starts
        try:
            sent = await self.runner.send(sid, prompt, "reject")
        except BaseException:
            await _close(events)
            raise
        return events, RunTranslator(sid, run.run_id, sent.turn_id), start

    async def _stream(self, events: AsyncIterator[tuple[int, str]], translator: RunTranslator,
                      start: list[BaseEvent], encoder: EventEncoder) -> AsyncIterator[str]:
        try:
            for event in start:
                yield encoder.encode(event)
            async for seq, data in events:
                for event in translator.feed(seq, json.loads(data)):
                    yield encoder.encode(event)
                if translator.finished:
                    for rid, at in translator.interrupts.items():
                        self.pending[rid] = (translator.thread_id, at)
                    while len(self.pending) > _PENDING:
                        del self.pending[next(iter(self.pending))]
                    return
        finally:
            await _close(events)


async def _close(events: AsyncIterator[tuple[int, str]]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def agui_route(runner: Runner, path: str = "/v1/agui") -> Route:
    """The ``POST /v1/agui`` route over ``runner`` (to mount behind the server's guard)."""
    return Route(path, _Endpoint(runner).__call__, methods=["POST"])
