"""Fixtures for the provider tests: the loopback server, a retry policy that never really
sleeps, and a helper that runs one turn through the public API and returns its events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from loopback_llm import LoopbackServer, running_server

from steerable import Agent, AgentLoop, EventKind
from steerable.providers._retry import RetryPolicy


class RecordedSleeps:
    """A ``sleep`` for RetryPolicy that records the delays and only yields to the loop."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with running_server() as s:
        yield s
        assert not s.unexpected, f"requests nobody scripted: {s.unexpected}"
        assert not s.steps, f"scripted responses never requested: {len(s.steps)}"


@pytest.fixture
def sleeps() -> RecordedSleeps:
    return RecordedSleeps()


@pytest.fixture
def retry(sleeps: RecordedSleeps) -> RetryPolicy:
    # random() == 0.5: the jittered delay is exactly half the cap, so tests can state it.
    return RetryPolicy(max_attempts=3, base_delay=0.2, max_delay=5.0, max_total=30.0,
                       sleep=sleeps, random=lambda: 0.5)


async def run_turn(provider: Any, prompt: str = "hi", *, tools: Sequence[Any] = (),
                   **agent_options: Any) -> tuple[Any, list[Any]]:
    """One turn on a fresh loop; the result and every event it emitted."""
    loop = AgentLoop(Agent(provider=provider, tools=list(tools), **agent_options))
    sub = loop.subscribe()
    try:
        result = await loop.run_turn(prompt, session_id="s")
    finally:
        await provider.aclose()
    events = sub.drain_nowait()
    return result, events


def kinds(events: Sequence[Any], *wanted: EventKind) -> list[Any]:
    return [e for e in events if e.kind in wanted]
