"""How many passes of the asyncio event loop a turn's steps take (docs/performance.md,
2026-12-08): an instant tool call takes one, a caller wakes in the pass after its turn ended,
and a hard abort's turn unwinds in the pass its tools see their cancel. Each figure is a
design choice a refactor could silently undo; counting passes, not time, keeps the tests
exact on a loaded machine."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, tool

K = EventKind


class Passes:
    """Counts the loop's passes: a callback that schedules itself runs once per pass (a
    callback scheduled during a pass runs in the next one)."""

    def __init__(self) -> None:
        self.count = 0
        self.at: dict[str, int] = {}
        self._on = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        if self._on:
            asyncio.get_running_loop().call_soon(self._tick)

    def mark(self, name: str) -> None:
        self.at.setdefault(name, self.count)

    def stop(self) -> None:
        self._on = False


@tool(read_only=True)
async def instant(i: int) -> int:
    """Return at once."""
    return i + 1


async def test_each_instant_tool_call_takes_one_loop_pass() -> None:
    n = 20
    script = [Reply(tool_calls=[("instant", {"i": i})]) for i in range(n)] + [Reply(text="ok")]
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider(script), tools=[instant],
                           max_iterations=n + 5))
    passes = Passes()
    ends: list[int] = []
    loop.observe(lambda e: ends.append(passes.count), [K.TOOL_EXEC_END])
    result = await loop.run_turn("go", session_id="s")
    passes.stop()
    await loop.aclose()
    assert result.iterations == n + 1
    # The turn yields once per call, and the tool's first step runs in that same pass (it was
    # scheduled first): one pass from one tool's end to the next (two when the turn waited
    # for the tool's task to wake it).
    assert [b - a for a, b in itertools.pairwise(ends)] == [1] * (n - 1)


async def test_the_caller_resumes_in_the_pass_after_its_turn_ends() -> None:
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider([Reply(text="ok")])))
    passes = Passes()
    loop.observe(lambda e: passes.mark("turn_end"), [K.TURN_END])
    await loop.run_turn("go", session_id="s")
    resumed = passes.count
    passes.stop()
    await loop.aclose()
    # The turn's last step sets the caller's future: one pass, not a done callback's two.
    assert resumed - passes.at["turn_end"] == 1


async def test_a_hard_abort_unwinds_the_turn_in_the_pass_its_tools_see_their_cancel() -> None:
    started = asyncio.Event()
    cancelled_at: list[int] = []
    passes: Any = None

    @tool(read_only=True)
    async def hang() -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled_at.append(passes.count)
            raise
        return "never"

    loop = AgentLoop(Agent(name="a", tools=[hang], provider=ScriptedProvider(
        [Reply(tool_calls=[("hang", {})])])))
    handle = loop.start_turn("go", session_id="s")
    await started.wait()
    passes = Passes()
    await asyncio.sleep(0)  # (the counter's first pass)
    loop.observe(lambda e: passes.mark(e.kind.value),
                 [K.INTERRUPT_RECEIVED, K.TOOL_EXEC_END, K.TURN_END])
    called = passes.count
    assert loop.interrupt_hard("s")
    result = await handle
    passes.stop()
    await loop.aclose()
    assert result.status.value == "aborted"
    # INTERRUPT_RECEIVED in the call itself; the tool's cancel and the whole unwinding of the
    # turn (its TOOL_EXEC_END, TURN_END) in the next pass.
    assert passes.at["interrupt_received"] == called
    assert cancelled_at == [called + 1]
    assert passes.at["tool_exec_end"] == passes.at["turn_end"] == called + 1
