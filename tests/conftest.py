"""Shared helpers: build a loop around a script, and read its events."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

# Hypothesis imports its optimiser on the first test that generates enough to optimise, and
# pytest rewrites a plugin's modules as they are imported. On CPython 3.11 before 3.11.8, two
# AST conversions at once (that rewrite, and another thread's compile while a Temporal worker
# or a tool runs) share one recursion counter and fail with "AST constructor recursion depth
# mismatch" (gh-106905): it is imported here, before any test starts a thread.
import hypothesis.internal.conjecture.optimiser  # noqa: F401
import pytest
from hypothesis import settings

from steerable import Agent, AgentLoop, Event, EventKind, ScriptedProvider, Subscription, tool

# No deadline on any example: a deadline is a timed assertion, which fails a correct test on a
# loaded machine (CI's or a shared one). Timing belongs in bench/.
settings.register_profile("steerable", deadline=None)
settings.load_profile("steerable")

# Every test must stop (and reap) the processes it starts: tests/_leaks.py fails it otherwise.
pytest_plugins = ["tests._leaks"]


def held_tool() -> tuple[Any, asyncio.Event]:
    """A read-only tool ``hold`` that returns "held" once the event is set: a turn parked
    in a tool for as long as a test needs (set the event to let it end)."""
    gate = asyncio.Event()

    @tool(read_only=True)
    async def hold() -> str:
        """Hold."""
        await gate.wait()
        return "held"

    return hold, gate


def make_loop(script: Sequence[Any], tools: Sequence[Any] = (), **agent_kw: Any) -> tuple[AgentLoop, ScriptedProvider, Subscription]:
    provider = ScriptedProvider(script)
    agent = Agent(name="test", instructions="You are a test agent.", provider=provider,
                  tools=list(tools), **agent_kw)
    loop = AgentLoop(agent)
    return loop, provider, loop.subscribe(buffer=10_000)


def kinds(events: Sequence[Event], *, skip_state: bool = True) -> list[EventKind]:
    skip = {EventKind.STATE_CHANGED, EventKind.LLM_DELTA, EventKind.MESSAGE_STATE} if skip_state \
        else set()
    return [e.kind for e in events if e.kind not in skip]


def of(events: Sequence[Event], kind: EventKind) -> list[Any]:
    return [e for e in events if e.kind is kind]


async def wait_for(sub: Subscription, kind: EventKind, timeout: float = 5.0, seen: list[Event] | None = None) -> Any:
    """Read ``sub`` until an event of ``kind`` arrives (events read are kept in ``seen``)."""
    async def read() -> Any:
        async for event in sub:
            if seen is not None:
                seen.append(event)
            if event.kind is kind:
                return event
        raise AssertionError(f"subscription closed before {kind}")

    return await asyncio.wait_for(read(), timeout)


def assert_one_terminal_per_call(events: Sequence[Event]) -> None:
    """Every declared tool call has exactly one TOOL_EXEC_END or TOOL_EXEC_SKIPPED."""
    declared = [c.id for e in of(events, EventKind.LLM_RESPONSE) for c in e.tool_calls]
    terminal = [e.call_id for e in events
                if e.kind in (EventKind.TOOL_EXEC_END, EventKind.TOOL_EXEC_SKIPPED)]
    assert sorted(declared) == sorted(terminal), (declared, terminal)


def assert_history_consistent(messages: Sequence[Any]) -> None:
    """No tool call without its result, results right after their call, in declared order."""
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            results = [r.tool_call_id for r in messages[i + 1 : i + 1 + len(ids)]]
            assert results == ids, f"calls {ids} answered by {results}"
            i += 1 + len(ids)
            continue
        assert m.role != "tool", f"orphan tool result at {i}: {m}"
        i += 1


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def message_fates(events: Sequence[Event]) -> dict[str, list[str]]:
    """Each message's MESSAGE_STATE states, in order (``queued`` again marks an edit)."""
    fates: dict[str, list[str]] = {}
    for e in events:
        if e.kind is EventKind.MESSAGE_STATE:
            fates.setdefault(e.message_id, []).append(e.state.value)
    return fates


def assert_one_terminal_each(events: Sequence[Event]) -> dict[str, str]:
    """Every message seen has exactly one terminal state, its last; returns id -> that state."""
    out: dict[str, str] = {}
    for mid, states in message_fates(events).items():
        terminal = [s for s in states if s != "queued"]
        assert len(terminal) == 1 and states[-1] == terminal[0], (mid, states)
        out[mid] = terminal[0]
    return out
