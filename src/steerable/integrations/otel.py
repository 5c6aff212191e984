"""OpenTelemetry traces of an agent loop, following the GenAI semantic conventions (extra ``otel``).

    from steerable.integrations.otel import OpenTelemetryHook
    loop.register_hook(OpenTelemetryHook(provider_name="openai"))

Each turn is an ``invoke_agent {agent}`` span; each LLM call a ``chat {model}`` client span under
it (model, token usage, finish reason); each tool call an ``execute_tool {tool}`` span. A sub-turn's
span is a child of the tool-call span that spawned it (``SUBTURN_SPAWN`` on the parent's turn,
then the child's ``TURN_START`` with ``parent_turn_id``). Interrupts, steering, approvals, retries,
skipped tools, compressions and errors are span events. A turn that ends ``aborted`` or
``error`` gets an error status, and so does every span of it still open (a cancelled LLM call).

The hook is an observer only, and costs nothing when not registered. Registered
(``register_hook``), it offers ``on_event_nowait``: the loop calls it with each event as it is
emitted (an append to the pending batch), with no subscription, task or hook call per event
(~10 us an iteration less than being fed ``on_event`` from a subscription), a failure of the
span work is reported as an ERROR event, and the loop's ``aclose`` waits for the spans.
Attached (``hook.attach(loop)``), it reads the loop's bus the same way (``AgentLoop.observe``)
but outside the hooks: a failure of the span work detaches it, and ``await hook.flush()`` waits
for what was handed over. The same spans come out either way. The events
it needs are collected on the loop's thread and turned into spans in batches (at each turn's
end, or every few hundred events) on one worker thread, so a slow exporter cannot block the
loop and the span work costs one thread hop per batch, not per event. The worker is shared by
every hook of the process and started at the first batch: a hook made per loop (or per test)
starts no thread of its own and leaves none behind. Deltas
and state changes are dropped at once. Spans take their times from the events, so they are
exact however late they are made.
No message content is recorded unless ``capture_content=True`` (then: the turn's input, each
LLM reply, tool arguments and results, steering text).
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "OpenTelemetry support needs opentelemetry-api: pip install 'steerable[otel]'"
    ) from exc

from steerable import Event, EventKind, TurnStatus, __version__

if TYPE_CHECKING:
    from steerable import AgentLoop

__all__ = ["OpenTelemetryHook"]

_FAILED = (TurnStatus.ABORTED, TurnStatus.ERROR)
_OK = Status(StatusCode.OK)
# An enum member read from its class costs 90-190 ns on Python 3.11, a global 10-20 ns: this
# one is read for every event collected.
_TURN_END = EventKind.TURN_END
# Events are applied in batches on one worker thread: each hand-over costs a thread wake-up and
# GIL ping-pong, so fewer, larger batches (256 events, or at a turn's end, or once the oldest
# waited 1 s) cost ~25 us less per iteration than batches of 32. Exporters see no delay: a span
# is exported when it ends, and it ends in the batch that holds its end event.
_BATCH = 256
_BATCH_AGE = 1.0
_worker: ThreadPoolExecutor | None = None
"""The one thread that applies every hook's batches, in the order they were handed over."""


def _shared_worker() -> ThreadPoolExecutor:
    global _worker
    if _worker is None:
        _worker = ThreadPoolExecutor(1, thread_name_prefix="steerable-otel")
    return _worker


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


@dataclass(slots=True)
class _Turn:
    span: Span
    context: Any
    """The context with ``span`` current, made once: every LLM and tool span of the turn goes
    under it (the SDK reads the parent from a context, ~1.5 us to make one)."""
    llm: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)


class OpenTelemetryHook:
    """An observer hook that turns a loop's events into OpenTelemetry spans.

    ``tracer_provider`` defaults to the global one. ``provider_name`` fills
    ``gen_ai.provider.name`` (``openai``, ``anthropic``...). ``capture_content`` adds message
    content to spans, which may hold personal data: off by default.
    """

    name = "opentelemetry"

    @property
    def event_kinds(self) -> frozenset[EventKind]:
        """The kinds this observer uses: the loop does not send it the others."""
        return _KINDS

    def __init__(self, *, tracer_provider: TracerProvider | None = None,
                 provider_name: str | None = None, capture_content: bool = False) -> None:
        self._tracer = trace.get_tracer("steerable", __version__, tracer_provider=tracer_provider)
        self._provider_name = provider_name
        self._content = capture_content
        self._turns: dict[str, _Turn] = {}
        self._spawned_by: dict[str, Span] = {}
        """child turn id -> the span the child's turn span goes under."""
        self._pending: list[Event] = []
        self._handed: Future[None] | None = None
        """The last batch handed to the worker by ``attach``'s observer."""

    # -- the observer -------------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        if event.kind not in _HANDLERS:
            return
        pending = self._pending
        pending.append(event)
        if (len(pending) >= _BATCH or event.kind is _TURN_END
                or event.time - pending[0].time >= _BATCH_AGE):
            batch, self._pending = self._pending, []
            # One worker: batches are applied in order even if an earlier one was slow.
            await asyncio.get_running_loop().run_in_executor(_shared_worker(), self._apply, batch)

    def on_event_nowait(self, event: Event) -> None:
        """What ``register_hook`` calls with each event as it is emitted (``on_event`` is what
        a loop without inline observers calls): the event joins the pending batch. A failure
        of the span work is raised once, at the next batch handed over (the loop reports it
        as an ERROR event), and the hook goes on; the loop's ``aclose`` awaits ``flush``."""
        try:
            self._collect(event)
        except Exception:
            self._handed = None  # reported once
            raise

    def attach(self, loop: AgentLoop) -> None:
        """Read ``loop``'s events as they are emitted (see the module docstring) instead of
        being registered as a hook. A failure of the span work detaches it (the next event
        raises it into the bus, which keeps it in the observer's ``error``), and ``flush``
        raises it."""
        loop.observe(self._collect, self.event_kinds)

    def _collect(self, event: Event) -> None:
        pending = self._pending
        pending.append(event)
        if (len(pending) >= _BATCH or event.kind is _TURN_END
                or event.time - pending[0].time >= _BATCH_AGE):
            handed = self._handed
            error = handed.exception() if handed is not None and handed.done() else None
            if error is not None:
                raise error
            batch, self._pending = self._pending, []
            self._handed = _shared_worker().submit(self._apply, batch)

    async def flush(self) -> None:
        """Hand over the events still pending and wait until every batch handed over has been
        turned into spans (``attach``); raises what the span work raised."""
        if self._pending:
            batch, self._pending = self._pending, []
            self._handed = _shared_worker().submit(self._apply, batch)
        handed = self._handed
        if handed is None:
            return
        if handed.done():  # (most often, by a loop's close): no hop through the event loop
            handed.result()  # raises what the span work raised
            return
        await asyncio.wrap_future(handed)  # one worker: the last batch ends after the others

    def _apply(self, batch: list[Event]) -> None:
        for event in batch:
            self.handle(event)

    def handle(self, event: Event) -> None:
        """Turn one event into span work at once, on the caller's thread (``on_event`` batches
        events and calls this from its worker)."""
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, event)

    def open_spans(self) -> int:
        """Spans started and not yet ended (for tests and leak checks)."""
        return sum(1 + (t.llm is not None) + len(t.tools) for t in self._turns.values())

    # -- turns --------------------------------------------------------------------------------

    def _turn_start(self, e: Any) -> None:
        parent = self._parent_of(e)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": e.agent,
            "gen_ai.conversation.id": e.session_id,
            "steerable.turn.id": e.turn_id,
        }
        if e.parent_turn_id is not None:
            attributes["steerable.turn.parent_id"] = e.parent_turn_id
        if self._provider_name:
            attributes["gen_ai.provider.name"] = self._provider_name
        if self._content:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": e.input}]}])
        span = self._tracer.start_span(
            f"invoke_agent {e.agent}", context=parent, kind=SpanKind.INTERNAL,
            attributes=attributes, start_time=_ns(e.time))
        self._turns[e.turn_id] = _Turn(span, trace.set_span_in_context(span))

    def _parent_of(self, e: Any) -> Any:
        if e.parent_turn_id is None:
            return None  # a top-level turn: under whatever span is current, if any
        spawner = self._spawned_by.pop(e.turn_id, None)
        if spawner is None:  # no SUBTURN_SPAWN seen yet: the parent's running tool, else its turn
            parent = self._turns.get(e.parent_turn_id)
            if parent is not None:
                spawner = _latest(parent.tools) or parent.span
        return trace.set_span_in_context(spawner) if spawner is not None else None

    def _turn_end(self, e: Any) -> None:
        turn = self._turns.pop(e.turn_id, None)
        if turn is None:
            return
        status = TurnStatus(e.status)
        end = _ns(e.time)
        # Whatever is still open was cut short by the turn's end (an abort cancels the LLM call).
        for span in [*([turn.llm] if turn.llm is not None else []), *turn.tools.values()]:
            span.set_status(Status(StatusCode.ERROR, f"turn {status.value}"))
            span.set_attribute("error.type", f"turn_{status.value}")
            span.end(end_time=end)
        span = turn.span
        span.set_attribute("steerable.turn.status", status.value)
        span.set_attribute("steerable.turn.iterations", e.iterations)
        if e.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", e.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", e.usage.output_tokens)
        if self._content and e.text:
            span.set_attribute("gen_ai.output.messages", _text_message(e.text))
        if status in _FAILED:
            span.set_status(Status(StatusCode.ERROR, e.error or f"turn {status.value}"))
            span.set_attribute("error.type", e.error.split(":", 1)[0] if e.error else status.value)
        else:
            span.set_status(_OK)
        span.end(end_time=end)

    # -- LLM calls ----------------------------------------------------------------------------

    def _llm_request(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        if turn is None:
            return
        model = e.model or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "steerable.iteration": e.iteration,
            "steerable.llm.message_count": e.message_count,
        }
        if self._provider_name:
            attributes["gen_ai.provider.name"] = self._provider_name
        if e.tools:  # (the SDK keeps a sequence as a tuple: one made here is kept as it is)
            attributes["steerable.llm.tools"] = tuple(e.tools)
        turn.llm = self._tracer.start_span(
            f"chat {model}", context=turn.context, kind=SpanKind.CLIENT,
            attributes=attributes, start_time=_ns(e.time))

    def _llm_response(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        if turn is None or turn.llm is None:
            return
        span, turn.llm = turn.llm, None
        # One set_attribute call each: the SDK checks a mapping given to set_attributes as a
        # whole (two abstract-class checks) before each value, which costs more.
        if e.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", (e.finish_reason,))
        if e.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", e.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", e.usage.output_tokens)
        if e.tool_calls:
            span.set_attribute("steerable.llm.tool_calls", tuple([c.name for c in e.tool_calls]))
        if self._content:
            span.set_attribute("gen_ai.output.messages", _reply_message(e))
        span.end(end_time=_ns(e.time))

    def _llm_retry(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        target = turn.llm or turn.span if turn is not None else None
        if target is not None:
            target.add_event("steerable.llm.retry", {"attempt": e.attempt, "reason": e.reason,
                                                     "delay": e.delay}, timestamp=_ns(e.time))

    # -- tools --------------------------------------------------------------------------------

    def _tool_start(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        if turn is None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": e.tool_name,
            "gen_ai.tool.call.id": e.call_id,
            "gen_ai.tool.type": "function",
        }
        if self._content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(dict(e.arguments), default=str)
        turn.tools[e.call_id] = self._tracer.start_span(
            f"execute_tool {e.tool_name}", context=turn.context,
            kind=SpanKind.INTERNAL, attributes=attributes, start_time=_ns(e.time))

    def _tool_end(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        span = turn.tools.pop(e.call_id, None) if turn is not None else None
        if span is None:
            return
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", e.content)
        if e.is_error:
            span.set_status(Status(StatusCode.ERROR, e.content[:200]))
            span.set_attribute("error.type", "tool_error")
        span.end(end_time=_ns(e.time))

    def _tool_progress(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        span = turn.tools.get(e.call_id) if turn is not None else None
        if span is not None:
            span.add_event("steerable.tool.progress", {"text": e.text}, timestamp=_ns(e.time))

    # -- sub-turns ----------------------------------------------------------------------------

    def _subturn_spawn(self, e: Any) -> None:
        turn = self._turns.get(e.turn_id)
        if turn is None:
            return
        call_id = getattr(e, "call_id", None)
        spawner = turn.tools.get(call_id) if call_id else None
        self._spawned_by[e.child_turn_id] = spawner or _latest(turn.tools) or turn.span

    def _subturn_end(self, e: Any) -> None:
        self._spawned_by.pop(e.child_turn_id, None)  # a child that never started a turn
        self._turn_event(e, "steerable.subturn.end", {"child_turn_id": e.child_turn_id,
                                                      "status": str(e.status)})

    # -- span events --------------------------------------------------------------------------

    def _turn_event(self, e: Any, name: str, attributes: dict[str, Any]) -> None:
        turn = self._turns.get(e.turn_id)
        if turn is not None:
            turn.span.add_event(name, {k: v for k, v in attributes.items() if v is not None},
                                timestamp=_ns(e.time))

    def _interrupt(self, e: Any) -> None:
        self._turn_event(e, "steerable.interrupt", {"mode": e.mode, "hint": e.hint})

    def _steering(self, e: Any) -> None:
        self._turn_event(e, "steerable.steering", {"text": e.text if self._content else None})

    def _follow_up(self, e: Any) -> None:
        self._turn_event(e, "steerable.follow_up", {"text": e.text if self._content else None})

    def _skipped(self, e: Any) -> None:
        self._turn_event(e, "steerable.tool.skipped", {"gen_ai.tool.name": e.tool_name,
                                                       "gen_ai.tool.call.id": e.call_id,
                                                       "reason": e.reason})

    def _approval(self, e: Any) -> None:
        attributes: dict[str, Any] = {"gen_ai.tool.name": e.tool_name,
                                      "gen_ai.tool.call.id": e.call_id}
        if e.kind is EventKind.APPROVAL_RESOLVED:
            attributes["approved"] = e.approved
        self._turn_event(e, f"steerable.{e.kind.value}", attributes)

    def _compress(self, e: Any) -> None:
        self._turn_event(e, "steerable.context_compress", {
            "reason": e.reason, "messages_before": e.messages_before,
            "messages_after": e.messages_after})

    def _error(self, e: Any) -> None:
        self._turn_event(e, "steerable.error", {"message": e.message, "source": e.source})


def _latest(spans: dict[str, Span]) -> Span | None:
    return next(reversed(spans.values()), None) if spans else None


def _text_message(text: str) -> str:
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


def _reply_message(e: Any) -> str:
    parts: list[dict[str, Any]] = []
    if e.text:
        parts.append({"type": "text", "content": e.text})
    for call in e.tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": dict(call.arguments)})
    return json.dumps([{"role": "assistant", "parts": parts,
                        "finish_reason": e.finish_reason}], default=str)


_HANDLERS: dict[EventKind, Any] = {
    EventKind.TURN_START: OpenTelemetryHook._turn_start,
    EventKind.TURN_END: OpenTelemetryHook._turn_end,
    EventKind.LLM_REQUEST: OpenTelemetryHook._llm_request,
    EventKind.LLM_RESPONSE: OpenTelemetryHook._llm_response,
    EventKind.LLM_RETRY: OpenTelemetryHook._llm_retry,
    EventKind.TOOL_EXEC_START: OpenTelemetryHook._tool_start,
    EventKind.TOOL_EXEC_END: OpenTelemetryHook._tool_end,
    EventKind.TOOL_EXEC_PROGRESS: OpenTelemetryHook._tool_progress,
    EventKind.TOOL_EXEC_SKIPPED: OpenTelemetryHook._skipped,
    EventKind.SUBTURN_SPAWN: OpenTelemetryHook._subturn_spawn,
    EventKind.SUBTURN_END: OpenTelemetryHook._subturn_end,
    EventKind.INTERRUPT_RECEIVED: OpenTelemetryHook._interrupt,
    EventKind.STEERING_INJECTED: OpenTelemetryHook._steering,
    EventKind.FOLLOW_UP_QUEUED: OpenTelemetryHook._follow_up,
    EventKind.APPROVAL_REQUESTED: OpenTelemetryHook._approval,
    EventKind.APPROVAL_RESOLVED: OpenTelemetryHook._approval,
    EventKind.CONTEXT_COMPRESS: OpenTelemetryHook._compress,
    EventKind.ERROR: OpenTelemetryHook._error,
}
_KINDS = frozenset(_HANDLERS)
