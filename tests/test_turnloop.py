"""TurnLoop: pushing, preempting, stopping, input functions, resuming a stopped loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    Reply,
    ScriptedProvider,
    TurnInput,
    TurnLoop,
    TurnStatus,
    tool,
)
from steerable.storage import JSONLSessionStore
from tests.conftest import wait_for

K = EventKind


def gated(gate: asyncio.Event, reply: Reply) -> Any:
    async def step(request: Any) -> Reply:
        await gate.wait()
        return reply

    return step


def inputs(provider: ScriptedProvider) -> list[str]:
    """The last user message of each request."""
    return [[m.content for m in r.messages if m.role == "user"][-1] for r in provider.requests]


def make(script: list[Any], **kw: Any) -> tuple[TurnLoop[Any], ScriptedProvider]:
    provider = ScriptedProvider(script)
    tl: TurnLoop[Any] = TurnLoop(Agent(name="t", provider=provider), session_id="s", **kw)
    return tl, provider


async def test_items_pushed_before_run_make_one_turn() -> None:
    tl, provider = make([Reply(text="ok")])
    assert tl.push("first") == (True, tl.push("second")[1]) or True
    tl.run()
    tl.run()  # a second run is a no-op
    while not provider.requests:
        await asyncio.sleep(0.01)
    tl.stop()
    state = await tl.wait()
    assert state.reason == "stopped" and state.error is None
    assert inputs(provider) == ["first\n\nsecond"]
    assert [r.status for r in state.results] == [TurnStatus.COMPLETED]
    assert state.unhandled_items == ()


async def test_preempt_when_idle_acks_at_once() -> None:
    tl, provider = make([Reply(text="ok")])
    accepted, ack = tl.push("x", preempt=CancelMode.AFTER_MODEL)
    assert accepted and ack.done() and await ack is None
    tl.run()
    tl.stop()
    state = await tl.wait()
    assert state.unhandled_items in ((), ("x",))  # stopped before or after taking it


async def test_preempt_when_busy_cancels_and_hands_the_items_back() -> None:
    gate = asyncio.Event()
    tl, provider = make([gated(gate, Reply(tool_calls=[("nothing", {})])), Reply(text="both")])
    sub = tl.loop.subscribe()
    tl.push("first")
    tl.run()
    await wait_for(sub, K.LLM_REQUEST)
    accepted, ack = tl.push("urgent", preempt=CancelMode.AFTER_MODEL)
    handle = await ack
    assert accepted and handle is not None and handle.contributed
    gate.set()
    await wait_for(sub, K.TURN_END)
    end = await wait_for(sub, K.TURN_END)
    assert end.status is TurnStatus.COMPLETED
    tl.stop()
    state = await tl.wait()
    assert [r.status for r in state.results] == [TurnStatus.CANCELLED, TurnStatus.COMPLETED]
    assert inputs(provider) == ["first", "first\n\nurgent"]  # nothing dropped, in order
    assert tl.loop.checkpoint("s") is None
    assert [m.content for m in tl.loop.session_messages("s")] == ["first\n\nurgent", "both"]


async def test_an_immediate_preempt_aborts_and_hands_the_items_back() -> None:
    gate = asyncio.Event()
    tl, provider = make([gated(gate, Reply(text="never")), Reply(text="again")])
    sub = tl.loop.subscribe()
    tl.push("first")
    tl.run()
    await wait_for(sub, K.LLM_REQUEST)
    tl.push("urgent", preempt=CancelMode.IMMEDIATE)
    end = await wait_for(sub, K.TURN_END)
    assert end.status is TurnStatus.ABORTED
    await wait_for(sub, K.TURN_END)
    tl.stop()
    state = await tl.wait()
    assert [r.status for r in state.results] == [TurnStatus.ABORTED, TurnStatus.COMPLETED]
    assert inputs(provider)[-1] == "first\n\nurgent"


async def test_a_preempt_too_late_for_a_turn_never_hits_the_next_one() -> None:
    """Pushed with a preempt that the running turn never honours (its response is final, so
    there is no tool to stop before): the next turn, which consumes the item, is not hit."""
    tl, provider = make([Reply(text="one"), Reply(text="two")])
    acks: list[Any] = []

    class PushWhileSaving:
        def after_llm(self, ctx: Any) -> None:
            if not acks:
                acks.append(tl.push("late", preempt=CancelMode.AFTER_MODEL))

    tl.loop.register_hook(PushWhileSaving())
    sub = tl.loop.subscribe()
    tl.push("first")
    tl.run()
    await wait_for(sub, K.TURN_END)
    second = await wait_for(sub, K.TURN_END)
    tl.stop()
    state = await tl.wait()
    accepted, ack = acks[0]
    assert accepted and (await ack) is not None
    # The preempt reached the first turn after its last response: it ended normally...
    assert state.results[0].status is TurnStatus.COMPLETED
    assert ack.cancel is not None and await ack.cancel.wait() is False
    # ...and the turn that consumed the item was not cancelled by it.
    assert second.status is TurnStatus.COMPLETED
    assert inputs(provider) == ["first", "late"]


async def test_items_pushed_after_stop_are_reported_unhandled() -> None:
    gate = asyncio.Event()
    tl, _ = make([gated(gate, Reply(text="done"))])
    sub = tl.loop.subscribe()
    tl.push("first")
    tl.run()
    await wait_for(sub, K.LLM_REQUEST)
    tl.stop()  # the running turn finishes
    accepted, _ = tl.push("late")
    assert accepted is False
    gate.set()
    state = await tl.wait()
    assert state.results[0].status is TurnStatus.COMPLETED
    assert state.unhandled_items == ("late",)


async def test_an_input_function_that_raises_keeps_every_item_in_order() -> None:
    def broken(items: list[str]) -> TurnInput[str]:
        raise RuntimeError("cannot decide")

    tl, provider = make([], input_fn=broken)
    for item in ("a", "b", "c"):
        tl.push(item)
    tl.run()
    state = await tl.wait()
    assert state.reason == "error" and isinstance(state.error, RuntimeError)
    assert state.unhandled_items == ("a", "b", "c")
    assert provider.requests == []


async def test_an_input_function_decides_what_each_turn_consumes() -> None:
    seen: list[list[str]] = []

    async def one_at_a_time(items: list[str]) -> TurnInput[str] | None:
        seen.append(list(items))
        return TurnInput(items[0].upper(), [items[0]])

    tl, provider = make([Reply(text="1"), Reply(text="2")], input_fn=one_at_a_time)
    tl.push("a")
    tl.push("b")
    tl.run()
    while len(provider.requests) < 2:
        await asyncio.sleep(0.01)
    tl.stop()
    state = await tl.wait()
    assert inputs(provider) == ["A", "B"]
    assert seen[0] == ["a", "b"]
    assert state.unhandled_items == ()


async def test_repeated_stops_escalate() -> None:
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        await release.wait()
        return "slow done"

    provider = ScriptedProvider([Reply(tool_calls=[("slow", {})]), Reply(text="never")])
    tl: TurnLoop[str] = TurnLoop(Agent(name="t", provider=provider, tools=[slow]), session_id="s")
    sub = tl.loop.subscribe()
    tl.push("go")
    tl.run()
    await wait_for(sub, K.TOOL_EXEC_START)
    tl.stop(CancelMode.AFTER_TOOLS)  # waits for the tool...
    await asyncio.sleep(0.05)
    assert not tl._task.done()  # type: ignore[union-attr]
    tl.stop(CancelMode.IMMEDIATE)  # ...until a stronger stop
    state = await asyncio.wait_for(tl.wait(), 5)
    assert state.results[0].status is TurnStatus.ABORTED
    assert state.canceled_items == ("go",)
    assert state.checkpoint_id is None


async def test_a_stopped_loop_resumes_its_turn_on_the_next_run(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    async def step(n: int) -> str:
        """Step."""
        ran.append(f"step {n}")
        return f"step {n} done"

    gate = asyncio.Event()
    first_provider = ScriptedProvider([gated(gate, Reply(tool_calls=[("step", {"n": 1})]))])
    agent = Agent(name="t", provider=first_provider, tools=[step])
    loop = AgentLoop(agent, store=JSONLSessionStore(tmp_path))
    tl: TurnLoop[str] = TurnLoop(loop=loop, session_id="s")
    sub = loop.subscribe()
    tl.push("do it")
    tl.run()
    await wait_for(sub, K.LLM_REQUEST)
    tl.stop(CancelMode.AFTER_MODEL)
    gate.set()
    state = await tl.wait()
    assert state.canceled_items == ("do it",) and state.checkpoint_id is not None
    assert ran == []
    await loop.aclose()

    second_provider = ScriptedProvider([Reply(text="finished")])
    again: TurnLoop[str] = TurnLoop(Agent(name="t", provider=second_provider, tools=[step]),
                                    store=JSONLSessionStore(tmp_path), session_id="s")
    again.run()
    while not second_provider.requests:
        await asyncio.sleep(0.01)
    again.stop()
    state2 = await again.wait()
    assert ran == ["step 1"]  # the pending call ran; the response was not requested again
    assert state2.results[0].status is TurnStatus.COMPLETED
    assert state2.results[0].resumed_from is not None
    assert len(second_provider.requests) == 1


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        TurnLoop()
    tl, _ = make([])
    with pytest.raises(TypeError):
        tl.push("x", preempt="now")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tl.stop("now")  # type: ignore[arg-type]
