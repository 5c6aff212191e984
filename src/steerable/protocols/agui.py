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
- an approval or a question (``ctx.ask``) the turn waits on: the run ends with ``RUN_FINISHED``
  whose outcome is an ``interrupt`` for every request the thread waits on (``_agui_interrupts``:
  ids are request ids); the turn keeps waiting (live, or parked in the store), and the next run
  of the thread with ``resume`` entries answers them and goes on streaming the same turn from
  where the last run stopped (a resume that leaves some unanswered ends with those at once);
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
from steerable.protocols._agui_interrupts import BadResume, answers_for, interrupt_for

__all__ = ["MAX_INPUT", "RunTranslator", "Runner", "agui_route", "parse_input"]

MAX_INPUT = 1 << 20
"""Bytes a ``RunAgentInput`` may have (it carries the client's copy of the conversation)."""
_PENDING = 4096
"""Interrupts whose replay position is remembered; past that the oldest are forgotten (their
resume still answers them, and streams from the present)."""
_THREAD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class _Sent(Protocol):
    @property
    def turn_id(self) -> str | None: ...


class Runner(Protocol):
    """What the endpoint calls: a subset of ``steerable.server.SessionRunner``."""

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None) -> _Sent: ...

    async def pending_requests(self, session_id: str | None) -> list[dict[str, Any]]: ...

    async def answer_request(self, request_id: str, approved: bool | None, value: Any,
                             reason: str) -> str | None: ...

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
    """Native events of one turn in, AG-UI events out; ``finished`` once the run is over,
    ``asking`` when the turn may wait for a person (the endpoint then looks what waits)."""

    thread_id: str
    run_id: str
    turn_id: str | None
    """The top-level turn this run follows (a resumed turn, once it starts, is followed)."""
    finished: bool = False
    asking: bool = False
    _text: str | None = None
    _reasoning: str | None = None
    _steps: dict[str, str] = field(default_factory=dict)

    def feed(self, seq: int, event: dict[str, Any]) -> list[BaseEvent]:
        kind = event.get("kind")
        top = event.get("parent_turn_id") is None
        if top and kind == "turn_start":
            self.turn_id = event.get("turn_id")
        if kind in ("approval_requested", "question_asked"):
            self.asking = True
            return []
        if kind == "turn_end" and top:
            if event.get("status") == "waiting":  # parked: what it waits on ends the run
                self.asking = True
                return []
            if event.get("turn_id") == self.turn_id or self.turn_id is None:
                return self._end(event)
        handler = _HANDLERS.get(str(kind))
        return handler(self, seq, event) if handler is not None else []

    def interrupt(self, waiting: list[dict[str, Any]]) -> list[BaseEvent]:
        """End the run on the requests the thread waits on."""
        self.finished = True
        outcome = RunFinishedInterruptOutcome(
            type="interrupt", interrupts=[interrupt_for(req) for req in waiting])
        return [*self._close(), RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                                 outcome=outcome)]

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
    "steering_injected": RunTranslator._steering, "subturn_spawn": RunTranslator._spawn,
    "subturn_end": RunTranslator._subturn_end,
}


@dataclass
class _Run:
    events: AsyncIterator[tuple[int, str]]
    translator: RunTranslator
    start: list[BaseEvent]
    upto: int | None
    """The seq of the last event the run has read (None: the thread's present)."""


class _Endpoint:
    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.pending: dict[str, tuple[str, int]] = {}
        """Interrupts a run ended on: request id -> (thread, seq up to which that run read).
        A resume replays the thread's events from there, so nothing the turn did meanwhile
        is missed; after a restart (forgotten) it streams from the present."""

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
            started = await (self._resume(run) if run.resume else self._begin(run))
        except (BadInput, BadResume, LookupError) as exc:
            return JSONResponse({"error": str(exc.args[0])}, 400)
        except (ValueError, SteerableError, ConnectionError) as exc:
            return JSONResponse({"error": str(exc)}, 409)
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        return StreamingResponse(self._stream(started, encoder),
                                 media_type=encoder.get_content_type(),
                                 headers={"Cache-Control": "no-store"})

    @staticmethod
    def _started(run: RunAgentInput) -> list[BaseEvent]:
        return [RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id,
                                parent_run_id=run.parent_run_id)]

    async def _begin(self, run: RunAgentInput) -> _Run:
        sid = run.thread_id
        prompt = _prompt(run)
        events = self.runner.events(sid, None)  # attached before the turn starts
        try:
            sent = await self.runner.send(sid, prompt, "reject")
        except BaseException:
            await _close(events)
            raise
        return _Run(events, RunTranslator(sid, run.run_id, sent.turn_id), self._started(run),
                    None)

    async def _resume(self, run: RunAgentInput) -> _Run:
        sid = run.thread_id
        assert run.resume is not None
        waiting = {r["request_id"]: r for r in await self.runner.pending_requests(sid)}
        answers = answers_for(run.resume, waiting)  # all checked before any is given
        known = [self.pending[a.request_id][1] for a in answers
                 if self.pending.get(a.request_id, ("", 0))[0] == sid]
        after = min(known) if known else None
        events = self.runner.events(sid, after)  # attached before the turn moves on
        try:
            for answer in answers:
                self.pending.pop(answer.request_id, None)
                await self.runner.answer_request(answer.request_id, answer.approved,
                                                 answer.value, answer.reason)
        except BaseException:
            await _close(events)
            raise
        translator = RunTranslator(sid, run.run_id, None)
        translator.asking = True  # what still waits (unanswered, or asked at once) ends it
        return _Run(events, translator, self._started(run), after)

    async def _waits(self, run: _Run) -> list[BaseEvent]:
        """When the turn may wait for a person: the interrupt, if anything waits."""
        translator = run.translator
        translator.asking = False
        waiting = await self.runner.pending_requests(translator.thread_id)
        if not waiting:
            return []  # answered meanwhile (or the turn went on): the run goes on
        if run.upto is not None:
            for req in waiting:
                self.pending[req["request_id"]] = (translator.thread_id, run.upto)
            while len(self.pending) > _PENDING:
                del self.pending[next(iter(self.pending))]
        return translator.interrupt(waiting)

    async def _stream(self, run: _Run, encoder: EventEncoder) -> AsyncIterator[str]:
        translator = run.translator
        try:
            for event in run.start:
                yield encoder.encode(event)
            if translator.asking:
                for event in await self._waits(run):
                    yield encoder.encode(event)
            while not translator.finished:
                got = await anext(run.events, None)
                if got is None:
                    return
                run.upto, data = got
                for event in translator.feed(run.upto, json.loads(data)):
                    yield encoder.encode(event)
                if translator.asking and not translator.finished:
                    for event in await self._waits(run):
                        yield encoder.encode(event)
        finally:
            await _close(run.events)


async def _close(events: AsyncIterator[tuple[int, str]]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def agui_route(runner: Runner, path: str = "/v1/agui") -> Route:
    """The ``POST /v1/agui`` route over ``runner`` (to mount behind the server's guard)."""
    return Route(path, _Endpoint(runner).__call__, methods=["POST"])
