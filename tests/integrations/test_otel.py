"""OpenTelemetry spans from a loop's events, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel test dependencies are not installed")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    LLMRequest,
    Reply,
    ScriptedProvider,
    ToolContext,
    Usage,
    tool,
)
from steerable._events import (
    LLMRequestEvent,
    LLMResponseEvent,
    SubturnEnd,
    SubturnSpawn,
    ToolExecEnd,
    ToolExecStart,
    TurnEnd,
    TurnStart,
    TurnStatus,
)
from steerable.integrations import otel
from steerable.integrations.otel import OpenTelemetryHook
from steerable.providers import RetryNotice, StreamEnd, TextDelta


@tool(read_only=True)
async def look(path: str, ctx: ToolContext) -> str:
    """Look."""
    ctx.progress("halfway")
    return f"saw {path}"


@tool
async def broken() -> str:
    """Fails."""
    raise RuntimeError("disk on fire")


def _setup(**hook_kw: Any) -> tuple[InMemorySpanExporter, OpenTelemetryHook]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, OpenTelemetryHook(tracer_provider=provider, **hook_kw)


def _by_name(spans: Sequence[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


async def _turn(script: list[Any], hook: OpenTelemetryHook, tools: list[Any] | None = None,
                **loop_kw: Any) -> Any:
    agent = Agent(name="helper", model="m1", provider=ScriptedProvider(script),
                  tools=tools if tools is not None else [look, broken])
    loop = AgentLoop(agent, **loop_kw)
    loop.register_hook(hook)
    result = await loop.run_turn("please look", session_id="s1")
    await loop.aclose()  # observers drain what is buffered before it returns
    return result


async def test_span_tree_and_genai_attributes() -> None:
    exporter, hook = _setup(provider_name="scripted")
    await _turn([Reply(text="looking", tool_calls=[("look", {"path": "a"})],
                       usage=Usage(10, 3)),
                 Reply(text="saw it", usage=Usage(20, 4))], hook)
    spans = exporter.get_finished_spans()
    named = _by_name(spans)
    assert sorted(named) == ["chat m1", "execute_tool look", "invoke_agent helper"]
    (turn,) = named["invoke_agent helper"]
    chats, (tool_span,) = named["chat m1"], named["execute_tool look"]
    assert turn.parent is None and len(chats) == 2
    for child in (*chats, tool_span):
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id
    assert dict(turn.attributes or {}).items() >= {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper",
        "gen_ai.conversation.id": "s1", "gen_ai.provider.name": "scripted",
        "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 7,
        "steerable.turn.status": "completed"}.items()
    assert turn.status.status_code is StatusCode.OK
    first = min(chats, key=lambda s: s.start_time or 0)
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "m1"
    assert first.attributes["gen_ai.usage.input_tokens"] == 10
    assert first.attributes["gen_ai.usage.output_tokens"] == 3
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert first.kind.name == "CLIENT"
    assert tool_span.attributes["gen_ai.tool.name"] == "look"
    assert tool_span.attributes["gen_ai.tool.call.id"].startswith("call_")
    assert [e.name for e in tool_span.events] == ["steerable.tool.progress"]
    # the spans nest in time as the turn did
    assert turn.start_time <= first.start_time <= first.end_time <= tool_span.start_time
    assert tool_span.end_time <= turn.end_time
    # no content unless asked
    everything = [a for s in spans for a in (s.attributes or {})]
    assert not [a for a in everything if "messages" in a or "arguments" in a or "result" in a]
    assert hook.open_spans() == 0


async def test_content_only_when_asked() -> None:
    exporter, hook = _setup(capture_content=True)
    await _turn([Reply(tool_calls=[("look", {"path": "secret.txt"})]), Reply(text="found")], hook)
    named = _by_name(exporter.get_finished_spans())
    (turn,) = named["invoke_agent helper"]
    assert "please look" in turn.attributes["gen_ai.input.messages"]
    assert "found" in turn.attributes["gen_ai.output.messages"]
    (tool_span,) = named["execute_tool look"]
    assert "secret.txt" in tool_span.attributes["gen_ai.tool.call.arguments"]
    assert tool_span.attributes["gen_ai.tool.call.result"] == "saw secret.txt"


async def test_tool_error_and_denial() -> None:
    exporter, hook = _setup()
    await _turn([Reply(tool_calls=[("broken", {}), ("look", {"path": "x"})]), Reply(text="hm")],
                hook, permissions=[("deny", "look")])
    named = _by_name(exporter.get_finished_spans())
    (bad,) = named["execute_tool broken"]
    assert bad.status.status_code is StatusCode.ERROR and "disk on fire" in bad.status.description
    assert "execute_tool look" not in named  # denied: never ran, so no span, but an event
    (turn,) = named["invoke_agent helper"]
    skipped = [e for e in turn.events if e.name == "steerable.tool.skipped"]
    assert [(e.attributes["gen_ai.tool.name"], e.attributes["reason"]) for e in skipped] == \
        [("look", "denied")]


async def test_aborted_turn_closes_every_span_with_an_error() -> None:
    exporter, hook = _setup()
    agent = Agent(name="helper", model="m1", provider=ScriptedProvider([
        Reply(text="slow", delay=30)]))
    loop = AgentLoop(agent)
    loop.register_hook(hook)
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    handle = loop.start_turn("go", session_id="s1")
    await anext(aiter(sub))
    loop.interrupt_hard("s1")
    result = await handle
    await loop.aclose()
    assert result.status is TurnStatus.ABORTED
    named = _by_name(exporter.get_finished_spans())
    (turn,), (chat,) = named["invoke_agent helper"], named["chat m1"]
    assert turn.status.status_code is StatusCode.ERROR
    assert chat.status.status_code is StatusCode.ERROR and chat.end_time <= turn.end_time
    assert chat.attributes["error.type"] == "turn_aborted"
    assert [e.attributes["mode"] for e in turn.events if e.name == "steerable.interrupt"] == ["hard"]
    assert hook.open_spans() == 0


class _Retrying:
    """A provider that retries once (as the HTTP providers do) before answering."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
        yield RetryNotice(2, "HTTP 429", 0.0)
        yield TextDelta("fine")
        yield StreamEnd(Usage(1, 1), "stop")

    async def aclose(self) -> None:
        return None


async def test_retries_steering_and_graceful_interrupts_are_span_events() -> None:
    exporter, hook = _setup()
    loop = AgentLoop(Agent(name="helper", model="m1", provider=_Retrying()))
    loop.register_hook(hook)
    await loop.run_turn("go", session_id="s1")
    agent2 = Agent(name="helper", model="m1", provider=ScriptedProvider([
        Reply(text="a", delay=0.2), Reply(text="b", delay=0.2), Reply(text="c")]))
    loop2 = AgentLoop(agent2)
    loop2.register_hook(hook)
    sub = loop2.subscribe(kinds=[EventKind.LLM_REQUEST])
    handle = loop2.start_turn("go", session_id="s2")
    await anext(aiter(sub))
    loop2.inject_steering("change course", session_id="s2")
    await anext(aiter(sub))
    assert loop2.interrupt_graceful("s2")
    await handle
    await loop.aclose()
    await loop2.aclose()
    spans = exporter.get_finished_spans()
    retried = [s for s in spans if s.name == "chat m1" and s.events]
    assert [e.name for e in retried[0].events] == ["steerable.llm.retry"]
    assert retried[0].events[0].attributes["reason"] == "HTTP 429"
    turn2 = next(s for s in spans if s.name == "invoke_agent helper"
             and s.attributes["gen_ai.conversation.id"] == "s2")
    names = [e.name for e in turn2.events]
    assert "steerable.steering" in names and "steerable.interrupt" in names
    steering = next(e for e in turn2.events if e.name == "steerable.steering")
    assert "text" not in (steering.attributes or {})  # content stays out
    assert turn2.attributes["steerable.turn.status"] == "interrupted"


def test_sub_turn_spans_are_children_of_the_spawning_tool_span() -> None:
    # The engine's sub-turns (SUBTURN_SPAWN/END, parent_turn_id) are fed here as the engine
    # emits them: parent turn, its `subagent` tool call, the spawn, the child's whole turn.
    exporter, hook = _setup()
    t, seq = time.time(), iter(range(1, 100))
    base = {"session_id": "s1", "time": t}

    def ev(cls: Any, turn: str, parent: str | None = None, **kw: Any) -> Any:
        return cls(turn_id=turn, parent_turn_id=parent, seq=next(seq), **base, **kw)

    for event in [
        ev(TurnStart, "P", input="go", agent="boss"),
        ev(LLMRequestEvent, "P", iteration=1, model="m", message_count=1, tools=("subagent",)),
        ev(LLMResponseEvent, "P", iteration=1, text="", tool_calls=()),
        ev(ToolExecStart, "P", iteration=1, call_id="c1", tool_name="subagent", arguments={}),
        ev(SubturnSpawn, "P", child_turn_id="C", agent="worker", is_async=False),
        ev(TurnStart, "C", "P", input="task", agent="worker"),
        ev(LLMRequestEvent, "C", "P", iteration=1, model="m", message_count=1, tools=()),
        ev(LLMResponseEvent, "C", "P", iteration=1, text="done", tool_calls=()),
        ev(TurnEnd, "C", "P", status=TurnStatus.COMPLETED, text="done", iterations=1),
        ev(SubturnEnd, "P", child_turn_id="C", status=TurnStatus.COMPLETED, text="done"),
        ev(ToolExecEnd, "P", call_id="c1", tool_name="subagent", is_error=False, content="done"),
        ev(TurnEnd, "P", status=TurnStatus.COMPLETED, text="ok", iterations=2),
    ]:
        hook.handle(event)
    named = _by_name(exporter.get_finished_spans())
    (boss,), (worker,), (call,) = (named["invoke_agent boss"], named["invoke_agent worker"],
                                   named["execute_tool subagent"])
    assert worker.parent is not None and worker.parent.span_id == call.context.span_id
    assert call.parent is not None and call.parent.span_id == boss.context.span_id
    assert worker.attributes["steerable.turn.parent_id"] == "P"
    child_chat = [s for s in named["chat m"] if s.parent.span_id == worker.context.span_id]
    assert len(child_chat) == 1
    assert [e.name for e in boss.events] == ["steerable.subturn.end"]
    assert hook.open_spans() == 0


class _Blocking(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        self.spans += spans
        return SpanExportResult.SUCCESS


async def test_a_stuck_exporter_never_blocks_the_turn() -> None:
    exporter = _Blocking()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    loop = AgentLoop(Agent(name="helper", model="m1", provider=ScriptedProvider(
        [Reply(tool_calls=[("look", {"path": "a"})]), Reply(text="done")]), tools=[look]))
    loop.register_hook(OpenTelemetryHook(tracer_provider=provider))
    result = await asyncio.wait_for(loop.run_turn("go", session_id="s1"), 5)
    assert result.text == "done" and exporter.spans == []  # the turn ended; export still stuck
    exporter.release.set()
    await loop.aclose(grace=5)
    assert len(exporter.spans) == 4


async def test_engine_sub_turns_nest_under_the_spawning_tool_span() -> None:
    exporter, hook = _setup()
    kid = Agent(name="researcher", model="m2", provider=ScriptedProvider([
        Reply(tool_calls=[("look", {"path": "deep"})]), Reply(text="X is 42")]), tools=[look])
    main = Agent(name="main", model="m1", subagents=[kid], provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "researcher", "task": "find X"})]),
        Reply(text="X=42")]))
    loop = AgentLoop(main)
    loop.register_hook(hook)
    await loop.run_turn("what is X?", session_id="s1")
    await loop.aclose()
    named = _by_name(exporter.get_finished_spans())
    (boss,), (worker,) = named["invoke_agent main"], named["invoke_agent researcher"]
    (call,) = named["execute_tool subagent"]
    (deep,) = named["execute_tool look"]
    assert call.parent.span_id == boss.context.span_id
    assert worker.parent.span_id == call.context.span_id  # the child under its spawning call
    assert deep.parent.span_id == worker.context.span_id
    assert {s.context.trace_id for s in exporter.get_finished_spans()} == {boss.context.trace_id}
    assert call.start_time <= worker.start_time <= worker.end_time <= call.end_time
    assert [e.name for e in boss.events] == ["steerable.subturn.end"]
    assert hook.open_spans() == 0


async def test_an_aborted_parent_closes_its_childrens_spans_with_errors() -> None:
    exporter, hook = _setup()
    kid = Agent(name="researcher", model="m2", provider=ScriptedProvider([
        Reply(text="slow", delay=30)]))
    main = Agent(name="main", model="m1", subagents=[kid], provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "researcher", "task": "find X"})])]))
    loop = AgentLoop(main)
    loop.register_hook(hook)
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    handle = loop.start_turn("go", session_id="s1")
    await anext(aiter(sub))
    await anext(aiter(sub))  # the child's call is under way
    loop.interrupt_hard("s1")
    await handle
    await loop.aclose()
    spans = exporter.get_finished_spans()
    assert {s.name for s in spans} == {"invoke_agent main", "invoke_agent researcher",
                                       "execute_tool subagent", "chat m1", "chat m2"}
    for name in ("invoke_agent main", "invoke_agent researcher", "chat m2",
                 "execute_tool subagent"):
        (span,) = _by_name(spans)[name]
        assert span.status.status_code is StatusCode.ERROR, name
    assert hook.open_spans() == 0


def _shape(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Spans as what they say, without their ids and times."""
    names = {s.context.span_id: s.name for s in spans}
    return sorted((s.name, s.kind.name, s.status.status_code.name,
                   names.get(s.parent.span_id) if s.parent else None,
                   sorted((k, str(v)) for k, v in (s.attributes or {}).items()
                          if k not in ("gen_ai.tool.call.id", "steerable.turn.id")),
                   [e.name for e in s.events]) for s in spans)


async def test_attached_to_the_bus_it_makes_the_spans_it_makes_registered() -> None:
    script = [Reply(text="looking", tool_calls=[("look", {"path": "a"}), ("broken", {})],
                    usage=Usage(10, 3)), Reply(text="saw it", usage=Usage(20, 4))]
    registered, hook = _setup(provider_name="scripted")
    await _turn(list(script), hook)
    attached, hook = _setup(provider_name="scripted")
    loop = AgentLoop(Agent(name="helper", model="m1", provider=ScriptedProvider(list(script)),
                           tools=[look, broken]))
    hook.attach(loop)
    result = await loop.run_turn("please look", session_id="s1")
    await hook.flush()
    await loop.aclose()
    assert result.text == "saw it"
    assert _shape(attached.get_finished_spans()) == _shape(registered.get_finished_spans())
    assert len(attached.get_finished_spans()) == 5 and hook.open_spans() == 0


async def test_attached_span_work_that_fails_detaches_it_and_flush_raises() -> None:
    class Failing(OpenTelemetryHook):
        def handle(self, event: Any) -> None:
            raise RuntimeError("tracer bug")

    loop = AgentLoop(Agent(name="helper", model="m1", provider=ScriptedProvider(
        [Reply(text="one"), Reply(text="two"), Reply(text="three")])))
    hook = Failing(tracer_provider=TracerProvider())
    hook.attach(loop)
    assert (await loop.run_turn("a", session_id="s1")).text == "one"
    with pytest.raises(RuntimeError, match="tracer bug"):
        await hook.flush()
    # The next batch boundary finds the failure: the observer is detached, turns go on.
    assert (await loop.run_turn("b", session_id="s1")).text == "two"
    assert (await loop.run_turn("c", session_id="s1")).text == "three"
    assert loop.statistics().subscribers == 0
    await loop.aclose()


async def test_registered_it_reads_the_bus_and_a_failure_of_the_span_work_is_reported() -> None:
    class Failing(OpenTelemetryHook):
        fed_by_task = 0

        async def on_event(self, event: Any) -> None:
            self.fed_by_task += 1
            await super().on_event(event)

        def handle(self, event: Any) -> None:
            if event.kind is EventKind.TURN_START and event.input == "a":
                raise RuntimeError("tracer bug")
            super().handle(event)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    loop = AgentLoop(Agent(name="helper", model="m1", provider=ScriptedProvider(
        [Reply(text="one"), Reply(text="two"), Reply(text="three")])))
    hook = Failing(tracer_provider=provider)
    loop.register_hook(hook)
    errors = loop.subscribe([EventKind.ERROR])
    assert (await loop.run_turn("a", session_id="s1")).text == "one"
    # The worker has applied the first turn's batch once a later job on it has run (one worker,
    # jobs in order): then turn b's hand-over finds the failure.
    await asyncio.wrap_future(otel._shared_worker().submit(lambda: None))
    assert (await loop.run_turn("b", session_id="s1")).text == "two"
    assert (await loop.run_turn("c", session_id="s1")).text == "three"
    await loop.aclose()  # waits for the spans
    reports = [e async for e in errors]
    assert [e.source for e in reports] == ["observer"]  # reported once, at the next batch
    assert "tracer bug" in reports[0].message
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("invoke_agent helper") == 2  # the later turns were traced
    assert hook.fed_by_task == 0  # a bus observer: no subscription, task or hook call


async def test_flush_returns_at_once_when_the_worker_is_done() -> None:
    exporter, hook = _setup()
    loop = AgentLoop(Agent(name="helper", provider=ScriptedProvider([Reply(text="one")])))
    hook.attach(loop)
    assert (await loop.run_turn("a", session_id="s1")).text == "one"
    await asyncio.wrap_future(otel._shared_worker().submit(lambda: None))  # batches applied
    flush = hook.flush()
    with pytest.raises(StopIteration):  # done without waiting on the event loop
        flush.send(None)
    assert [s.name for s in exporter.get_finished_spans()] == ["chat unknown", "invoke_agent helper"]
    await loop.aclose()
