"""A turn stopped before its task ran a step still ends, and whoever awaits it hears so: the
turn's task runs ``run_turn`` itself and callers wait on a future its last step sets, so every
way to stop a turn right after ``start_turn`` (in the same loop pass) must reach that step."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from steerable import Agent, AgentLoop, ScriptedProvider, TurnHandle, TurnStatus
from steerable.providers.scripted import Reply


def _hard(handle: TurnHandle) -> object:
    return handle.interrupt_hard()


def _cancel(handle: TurnHandle) -> object:
    return handle.cancel()


@pytest.mark.parametrize("stop", [_hard, _cancel], ids=["interrupt_hard", "cancel"])
async def test_a_turn_stopped_before_its_first_step_ends_aborted(
        stop: Callable[[TurnHandle], object]) -> None:
    provider = ScriptedProvider([Reply(text="never sent", delay=5.0)])
    async with AgentLoop(Agent(name="a", instructions="x", provider=provider)) as loop:
        handle = loop.start_turn("go", "s1")
        stop(handle)  # no await since start_turn: its task has not run a step
        result = await asyncio.wait_for(handle, 10)
        assert result.status is TurnStatus.ABORTED
        assert not loop.busy("s1")


async def test_a_turn_started_as_the_loop_closes_ends_aborted() -> None:
    provider = ScriptedProvider([Reply(text="never sent", delay=5.0)])
    loop = AgentLoop(Agent(name="a", instructions="x", provider=provider))
    handle = loop.start_turn("go", "s1")
    closing = asyncio.ensure_future(loop.aclose())
    result = await asyncio.wait_for(handle, 10)
    await closing
    assert result.status is TurnStatus.ABORTED
