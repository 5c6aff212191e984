"""Events nobody subscribes to are numbered and counted but never built; a tool's end wakes
the turn in the very next loop cycle."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Reply,
    ScriptedProvider,
    StateChanged,
    TurnPhase,
    tool,
)

K = EventKind


@tool(read_only=True)
async def add(i: int) -> int:
    """i + 1."""
    return i + 1


def _loop(provider: Any = None) -> AgentLoop:
    script = [Reply(tool_calls=[("add", {"i": 1})]), Reply(tool_calls=[("add", {"i": 2})]),
              Reply(text="done")]
    return AgentLoop(Agent(name="t", provider=provider or ScriptedProvider(script),
                           tools=[add]))


async def test_an_event_kind_nobody_listens_to_is_never_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    StateChanged(turn_id="t", parent_turn_id=None, session_id="s", seq=0, time=0.0,
                 old=TurnPhase.IDLE, new=TurnPhase.THINKING)  # its __init__ is compiled now
    built: list[dict[str, Any]] = []
    init = StateChanged.__init__

    def counting(self: StateChanged, **kw: Any) -> None:
        built.append(kw)
        init(self, **kw)

    monkeypatch.setattr(StateChanged, "__init__", counting)
    loop = _loop()
    ends = loop.subscribe([K.TURN_END])
    await loop.run_turn("go", session_id="s")
    assert built == [] and len(ends.drain_nowait()) == 1
    loop2 = _loop()
    states = loop2.subscribe([K.STATE_CHANGED])
    await loop2.run_turn("go", session_id="s")
    assert len(built) == len(states.drain_nowait()) > 0


async def test_seq_and_the_emitted_count_are_the_same_whoever_listens() -> None:
    everything_loop = _loop()
    everything = everything_loop.subscribe(buffer=10_000)
    await everything_loop.run_turn("go", session_id="s")
    few_loop = _loop()
    few = few_loop.subscribe([K.TURN_END, K.TOOL_EXEC_END])
    await few_loop.run_turn("go", session_id="s")
    seen = {(e.kind, e.seq) for e in few.drain_nowait()}
    full = everything.drain_nowait()
    assert seen == {(e.kind, e.seq) for e in full if e.kind in (K.TURN_END, K.TOOL_EXEC_END)}
    assert few_loop.statistics().events_emitted == everything_loop.statistics().events_emitted \
        == len(full)


async def test_the_turn_goes_on_in_the_loop_cycle_its_tool_ends_in() -> None:
    cycles = 0
    marks: dict[str, int] = {}

    async def ticker() -> None:
        nonlocal cycles
        while True:
            cycles += 1
            await asyncio.sleep(0)

    @tool(read_only=True)
    async def mark() -> str:
        """Notes the loop cycle it returns in."""
        marks["tool"] = cycles
        return "ok"

    def second_call(request: Any) -> Reply:
        marks["model"] = cycles  # the next model call starts as soon as the turn resumes
        return Reply(text="done")

    loop = AgentLoop(Agent(name="t", tools=[mark], provider=ScriptedProvider(
        [Reply(tool_calls=[("mark", {})]), second_call])))
    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        await loop.run_turn("go", session_id="s")
    finally:
        tick.cancel()
    # The tool returns in its first step, in cycle n, and the turn goes on in that same cycle:
    # it yielded once after starting the tool's task, whose step was scheduled first (waiting
    # for the tool to wake it would make it n + 1; a done callback, as asyncio.wait uses, n + 2)
    assert marks["model"] - marks["tool"] == 0, marks


def test_timer_callbacks_get_one_bare_context_per_thread() -> None:
    import threading

    from steerable._core._watchdog import bare_context

    mine = bare_context()
    assert bare_context() is mine and len(list(mine)) == 0
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(bare_context()))
    t.start()
    t.join()
    # two event loops in two threads may enter theirs at the same moment: never shared
    assert other[0] is not mine
