"""Steering and follow-up queues: delivery at checkpoints, bounds, nothing lost."""

from __future__ import annotations

import asyncio

from steerable import Agent, AgentLoop, EventKind, Limits, Reply, ScriptedProvider, TurnStatus, tool
from tests.conftest import assert_history_consistent, make_loop, of, wait_for

K = EventKind


def tools_with_gate() -> tuple[list, asyncio.Event, list[str]]:
    gate = asyncio.Event()
    ran: list[str] = []

    @tool
    async def step(name: str) -> str:
        """A mutating step that waits for the gate."""
        ran.append(name)
        if name == "first":
            await gate.wait()
        return name

    return [step], gate, ran


async def test_steering_during_tool_skips_the_rest_and_reaches_next_call() -> None:
    tools, gate, ran = tools_with_gate()
    script = [Reply(tool_calls=[("step", {"name": "first"}), ("step", {"name": "second"})]),
              Reply(text="adjusted")]
    loop, provider, sub = make_loop(script, tools=tools)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.inject_steering("use the other file", session_id="s")
    gate.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED and ran == ["first"]
    events = sub.drain_nowait()
    skipped = of(events, K.TOOL_EXEC_SKIPPED)
    assert [(s.reason) for s in skipped] == ["steering"]
    assert of(events, K.STEERING_INJECTED)[0].text == "use the other file"
    msgs = provider.requests[1].messages
    assert msgs[-1].role == "user" and msgs[-1].content == "use the other file"
    assert "new user message" in msgs[-2].content  # the skipped call's result says why
    saved = loop.session_messages("s")
    assert_history_consistent(saved)
    assert any(m.role == "user" and m.content == "use the other file" for m in saved)


async def test_steering_before_first_call_is_in_first_call() -> None:
    loop, provider, sub = make_loop([Reply(text="ok")])
    handle = loop.start_turn("go", session_id="s")
    assert loop.inject_steering("also X", session_id="s")
    await handle
    assert [m.content for m in provider.requests[0].messages[1:]] == ["go", "also X"]
    assert len(provider.requests) == 1


async def test_steering_after_final_answer_iterates_again() -> None:
    loop, provider, sub = make_loop([Reply(text="first answer", delay=0.1), Reply(text="second answer")])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    loop.inject_steering("actually, do Y", session_id="s")
    result = await handle
    assert result.status is TurnStatus.COMPLETED and result.text == "second answer"
    assert result.iterations == 2 and result.follow_ups == ()


async def test_steering_during_last_iteration_becomes_follow_up() -> None:
    loop, provider, sub = make_loop([Reply(text="final", delay=0.1)], max_iterations=1)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.inject_steering("late steering", session_id="s")
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    assert result.follow_ups == ("late steering",)
    assert of(sub.drain_nowait(), K.FOLLOW_UP_QUEUED)[0].text == "late steering"
    assert len(provider.requests) == 1


async def test_follow_ups_are_returned_not_run() -> None:
    loop, provider, sub = make_loop([Reply(text="one", delay=0.05)])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.inject_follow_up("then Y", session_id="s")
    assert loop.inject_follow_up("then Z", session_id="s")
    result = await handle
    assert result.follow_ups == ("then Y", "then Z")
    assert len(provider.requests) == 1
    assert [e.text for e in of(sub.drain_nowait(), K.FOLLOW_UP_QUEUED)] == ["then Y", "then Z"]


async def test_queues_are_bounded_and_refusal_is_reported() -> None:
    provider = ScriptedProvider([Reply(text="x", delay=0.1), Reply(text="y")])
    loop = AgentLoop(Agent(provider=provider), limits=Limits(steering_queue=2, follow_up_queue=1))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    assert loop.inject_steering("a", "s") and loop.inject_steering("b", "s")
    assert not loop.inject_steering("c", "s")
    assert loop.inject_follow_up("f1", "s") and not loop.inject_follow_up("f2", "s")
    await handle
    errors = [e.message for e in of(sub.drain_nowait(), K.ERROR)]
    assert any("steering queue full" in m for m in errors)
    assert any("follow-up queue full" in m for m in errors)


async def test_queues_are_per_turn_not_global() -> None:
    provider = ScriptedProvider([Reply(text="a", delay=0.05), Reply(text="b", delay=0.05)])
    loop = AgentLoop(Agent(provider=provider))
    h1 = loop.start_turn("one", session_id="s1")
    h2 = loop.start_turn("two", session_id="s2")
    assert loop.inject_steering("only for s2", session_id="s2")
    await h1, await h2
    assert [m.content for m in loop.session_messages("s1")] == ["one", "a"]
    assert [m.content for m in loop.session_messages("s2")] == ["two", "only for s2", "b"]


async def test_abort_returns_undelivered_and_rolled_back_steering() -> None:
    tools, gate, _ = tools_with_gate()
    loop, _, sub = make_loop([Reply(tool_calls=[("step", {"name": "first"})]), Reply(text="x", delay=10)],
                             tools=tools)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.inject_steering("delivered", "s")
    gate.set()
    await wait_for(sub, K.STEERING_INJECTED)
    loop.inject_steering("pending", "s")
    loop.inject_follow_up("later", "s")
    loop.interrupt_hard("s")
    result = await handle
    assert [(q.kind, q.text) for q in result.unprocessed] == [
        ("steering", "delivered"), ("steering", "pending"), ("follow_up", "later")]
    assert loop.session_messages("s") == []


async def test_no_active_turn_means_steering_is_refused_not_kept() -> None:
    loop, provider, _ = make_loop([Reply(text="ok")])
    assert not loop.inject_steering("nobody listens")
    assert not loop.inject_follow_up("nobody")
    await loop.run_turn("go", session_id="s")
    assert all(m.content != "nobody listens" for m in provider.requests[0].messages)
