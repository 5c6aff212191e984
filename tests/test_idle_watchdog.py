"""The LLM idle watchdog turns only its own cancel into a timeout: a silent stream fails the
call, while a hard abort during the same wait stays an abort (never an error or a retry)."""

from __future__ import annotations

import asyncio

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, Timeouts, TurnStatus


def _loop(script: list[Reply], idle: float) -> AgentLoop:
    agent = Agent(name="t", instructions="test", provider=ScriptedProvider(script))
    return AgentLoop(agent, timeouts=Timeouts(llm_idle=idle))


async def test_a_hard_abort_during_a_watched_wait_is_an_abort() -> None:
    loop = _loop([Reply(text="late", delay=30)], idle=20.0)
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    handle = loop.start_turn("go", session_id="s")
    await asyncio.wait_for(sub.__anext__(), 5)  # the model call (and its watchdog) is running
    assert loop.interrupt_hard(session_id="s")
    result = await asyncio.wait_for(handle, 5)
    assert result.status is TurnStatus.ABORTED and result.error is None
    await loop.aclose()


async def test_a_silent_stream_fails_the_turn_with_a_timeout() -> None:
    loop = _loop([Reply(text="late", delay=30)], idle=0.1)
    result = await asyncio.wait_for(loop.run_turn("go", session_id="s"), 10)
    assert result.status is TurnStatus.ERROR
    assert result.error is not None
    await loop.aclose()
