"""Every field of every event one turn emits, against the spec (SPEC 4 and 10): a turn that
streams a tool call, runs it, takes a steering message and a follow-up while the tool runs,
and answers. Ids are replaced by the order they first appear in, times and durations left
out; everything else is compared exactly, so an event that loses a field, or carries another
turn's, iteration or a default instead of its value, fails here."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    Event,
    EventKind,
    InMemorySessionStore,
    Reply,
    ScriptedProvider,
    ToolContext,
    Usage,
    tool,
)
from tests.conftest import wait_for

K = EventKind
UNTIMED = ("time", "seq", "duration")


def normalized(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Each event as (kind, fields): turn and message ids as T1, M1... in order of first
    appearance, ``request_seq`` as the index of the event it names."""
    names: dict[str, str] = {}
    index = {e.seq: i for i, e in enumerate(events)}

    def name(value: Any, prefix: str) -> Any:
        if not isinstance(value, str) or not value:
            return value
        if value not in names:
            names[value] = f"{prefix}{sum(n.startswith(prefix) for n in names.values()) + 1}"
        return names[value]

    out = []
    for e in events:
        fields: dict[str, Any] = {}
        for f in dataclasses.fields(e):  # type: ignore[arg-type]
            if f.name in UNTIMED:
                continue
            value = getattr(e, f.name)
            if f.name in ("turn_id", "parent_turn_id"):
                value = name(value, "T")
            elif f.name == "message_id":
                value = name(value, "M")
            elif f.name == "request_seq" and value is not None:
                value = index[value]
            fields[f.name] = value
        out.append((e.kind.value, fields))
    return out


async def _one_turn() -> list[Event]:
    gate = asyncio.Event()

    @tool
    async def act(name: str, ctx: ToolContext) -> str:
        """Do something."""
        await gate.wait()
        return f"did {name}"

    provider = ScriptedProvider([
        Reply(text="on it", tool_calls=[("act", {"name": "x"})], argument_pieces=2, thinking="hm",
              usage=Usage(input_tokens=10, output_tokens=5)),
        Reply(text="done", usage=Usage(input_tokens=20, output_tokens=3)),
    ])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[act]),
                     store=InMemorySessionStore())
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("the task", session_id="s")
    seen: list[Event] = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    assert loop.inject_steering("steer me", "s")
    assert loop.inject_follow_up("then this", "s")
    gate.set()
    await handle
    await loop.aclose()
    return seen + sub.drain_nowait()


T = {"turn_id": "T1", "parent_turn_id": None, "session_id": "s"}
U1 = Usage(input_tokens=10, output_tokens=5)
U2 = Usage(input_tokens=20, output_tokens=3)


def _expected() -> list[tuple[str, dict[str, Any]]]:
    from steerable import MessageState as S
    from steerable import ToolCall, TurnPhase, TurnStatus

    def msg(m: str, state: S, detail: str, kind: str, text: str,
            request_seq: int | None = None) -> tuple[str, dict[str, Any]]:
        return ("message_state", {**T, "message_id": m, "state": state, "detail": detail,
                                  "message_kind": kind, "text": text, "origin_id": None,
                                  "request_seq": request_seq})

    def phase(old: TurnPhase, new: TurnPhase) -> tuple[str, dict[str, Any]]:
        return ("state_changed", {**T, "old": old, "new": new})

    def request(iteration: int, count: int) -> tuple[str, dict[str, Any]]:
        return ("llm_request", {**T, "iteration": iteration, "model": None,
                                "message_count": count, "tools": ("act",),
                                "tool_choice": "auto", "may_call": None, "reason": "",
                                "purpose": ""})

    def delta(iteration: int, text: str, thinking: bool = False) -> tuple[str, dict[str, Any]]:
        return ("llm_delta", {**T, "iteration": iteration, "text": text, "thinking": thinking})

    def call_delta(piece: str) -> tuple[str, dict[str, Any]]:
        return ("tool_call_delta", {**T, "iteration": 1, "call_index": 0, "tool_name": "act",
                                    "arguments_delta": piece})

    delivered = "in the context of an LLM request"
    return [
        ("turn_start", {**T, "input": "the task", "agent": "a", "resumed_from": None}),
        msg("M1", S.QUEUED, "the input of a new turn", "send", "the task"),
        phase(TurnPhase.IDLE, TurnPhase.THINKING),
        request(1, 1),
        msg("M1", S.DELIVERED, delivered, "send", "the task", request_seq=3),
        delta(1, "hm", thinking=True),
        delta(1, "on "),
        call_delta('{"name": '),
        call_delta('"x"}'),
        delta(1, "it"),
        ("llm_response", {**T, "iteration": 1, "text": "on it",
                          "tool_calls": (ToolCall(id="call_1", name="act",
                                                  arguments={"name": "x"}),),
                          "usage": U1, "finish_reason": "tool_calls", "purpose": ""}),
        phase(TurnPhase.THINKING, TurnPhase.EXECUTING),
        ("tool_exec_start", {**T, "iteration": 1, "call_id": "call_1", "tool_name": "act",
                             "arguments": {"name": "x"}}),
        msg("M2", S.QUEUED, "steering", "steer", "steer me"),
        msg("M3", S.QUEUED, "follow_up", "follow_up", "then this"),
        ("follow_up_queued", {**T, "text": "then this"}),
        ("tool_exec_end", {**T, "call_id": "call_1", "tool_name": "act", "is_error": False,
                           "content": "did x"}),
        ("steering_injected", {**T, "text": "steer me"}),
        phase(TurnPhase.EXECUTING, TurnPhase.THINKING),
        request(2, 4),
        msg("M2", S.DELIVERED, delivered, "steer", "steer me", request_seq=19),
        delta(2, "done"),
        ("llm_response", {**T, "iteration": 2, "text": "done", "tool_calls": (), "usage": U2,
                          "finish_reason": "stop", "purpose": ""}),
        phase(TurnPhase.THINKING, TurnPhase.DONE),
        msg("M3", S.RETURNED, "turn T1 ended (completed) before it was delivered",
            "follow_up", "then this"),
        ("turn_end", {**T, "status": TurnStatus.COMPLETED, "text": "done", "iterations": 2,
                      "error": None, "usage": Usage(input_tokens=30, output_tokens=8),
                      "cancel_mode": None}),
    ]


async def test_every_field_of_every_event_of_a_turn() -> None:
    events = await _one_turn()
    got = normalized(events)
    turn_id = events[0].turn_id
    # (the detail of a returned message names the turn: compared under its placeholder)
    got = [(k, {n: v.replace(turn_id, "T1") if n == "detail" else v for n, v in f.items()})
           for k, f in got]
    expected = _expected()
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        assert g == e, f"event {i}: {g} != {e}"
    assert len(got) == len(expected)
    assert all(e.seq == events[0].seq + i for i, e in enumerate(events))  # no gap, in order
    assert all(e.time > 0 for e in events)
    assert all(e.duration > 0 for e in events if e.kind in (K.LLM_RESPONSE, K.TURN_END))


async def test_a_hooks_own_model_call_is_seen_with_its_purpose_and_counted() -> None:
    """``ctx.ask`` in ``before_llm``: one call of the hook's own, as LLM_REQUEST/LLM_RESPONSE
    of the turn with ``purpose`` set, no deltas, its tokens in the turn's usage."""
    from steerable import HookAction, HookDecision, LLMRequest, Message

    answers: list[str] = []

    class Classify:
        async def before_llm(self, ctx: Any) -> HookDecision:
            if not answers:
                response = await ctx.ask(LLMRequest(messages=(Message("user", "kind?"),)),
                                         "classify")
                answers.append(response.text)
            return HookDecision(HookAction.CONTINUE)

    provider = ScriptedProvider([Reply(text="a question", usage=Usage(input_tokens=3,
                                                                       output_tokens=2)),
                                 Reply(text="the answer", usage=Usage(input_tokens=7,
                                                                      output_tokens=4))])
    loop = AgentLoop(Agent(name="a", provider=provider))
    loop.register_hook(Classify())
    sub = loop.subscribe()
    result = await loop.run_turn("go", session_id="s")
    assert answers == ["a question"] and result.text == "the answer"
    assert result.usage == Usage(input_tokens=10, output_tokens=6)
    events = sub.drain_nowait()
    calls = [(e.kind.value, e.turn_id, e.session_id, e.purpose, e.iteration) for e in events
             if e.kind in (K.LLM_REQUEST, K.LLM_RESPONSE)]
    t = result.turn_id
    assert calls == [("llm_request", t, "s", "classify", 1), ("llm_response", t, "s", "classify", 1),
                     ("llm_request", t, "s", "", 1), ("llm_response", t, "s", "", 1)]
    usages = [e.usage for e in events if e.kind is K.LLM_RESPONSE]
    assert usages == [Usage(input_tokens=3, output_tokens=2), Usage(input_tokens=7,
                                                                    output_tokens=4)]
    deltas = [e.text for e in events if e.kind is K.LLM_DELTA]
    assert deltas == ["the ", "answer"]  # the hook's call streams none


async def test_the_events_a_tool_reports_carry_its_call_from_the_loop_and_from_a_thread() -> None:
    """``update_plan`` and ``progress`` from an async tool (on the loop) and a sync one (in a
    worker thread): the same events, with the call's id and the turn's ids."""
    plan = [{"content": "look", "status": "done"}, {"content": "act", "status": "pending"}]

    @tool(read_only=True)
    async def on_loop(ctx: ToolContext) -> str:
        """Report from the loop."""
        ctx.update_plan(plan)
        ctx.progress("half", done=1)
        return "ok"

    @tool(read_only=True)
    def in_thread(ctx: ToolContext) -> str:
        """Report from a thread."""
        ctx.update_plan(plan[:1])
        ctx.progress("all", done=2)
        return "ok"

    provider = ScriptedProvider([Reply(tool_calls=[("on_loop", {})]),
                                 Reply(tool_calls=[("in_thread", {})]), Reply(text="done")])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[on_loop, in_thread]))
    sub = loop.subscribe([K.PLAN_UPDATED, K.TOOL_EXEC_PROGRESS])
    result = await loop.run_turn("go", session_id="s")
    # (what the thread reported reached the loop before its result: one FIFO of callbacks)
    got = [(e.kind.value, e.turn_id, e.session_id, e.call_id,
            getattr(e, "items", None) or (e.text, dict(e.data)))
           for e in sub.drain_nowait()]
    t = result.turn_id
    assert got == [
        ("plan_updated", t, "s", "call_1", tuple(plan)),
        ("tool_exec_progress", t, "s", "call_1", ("half", {"done": 1})),
        ("plan_updated", t, "s", "call_2", tuple(plan[:1])),
        ("tool_exec_progress", t, "s", "call_2", ("all", {"done": 2})),
    ]
    await loop.aclose()


async def test_after_llm_sees_the_whole_response_the_stream_made() -> None:
    from steerable import HookAction, HookDecision, ToolCall

    seen: list[Any] = []

    class Look:
        def after_llm(self, ctx: Any) -> HookDecision:
            seen.append(ctx.response)
            return HookDecision(HookAction.CONTINUE)

    @tool(read_only=True)
    async def act(name: str) -> str:
        """Do something."""
        return name

    provider = ScriptedProvider([
        Reply(text="on it", thinking="let me think", tool_calls=[("act", {"name": "x"})],
              argument_pieces=2, usage=Usage(input_tokens=4, output_tokens=2)),
        Reply(text="done")])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[act]))
    loop.register_hook(Look())
    await loop.run_turn("go", session_id="s")
    first = seen[0]
    assert (first.text, first.thinking, first.usage, first.finish_reason) == (
        "on it", "let me think", Usage(input_tokens=4, output_tokens=2), "tool_calls")
    assert first.tool_calls == (ToolCall(id="call_1", name="act", arguments={"name": "x"}),)
    assert (seen[1].text, seen[1].thinking, seen[1].finish_reason) == ("done", "", "stop")
    await loop.aclose()
