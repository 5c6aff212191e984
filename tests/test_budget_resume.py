"""Budgets across a resume: a turn cancelled (or crashed) and resumed goes on counting from
what its checkpoint says it spent, so a turn that stops and resumes in a loop still stops at
its budgets; checkpoints written before these counts existed resume at zero."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    InMemorySessionStore,
    Limits,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    Usage,
    tool,
)
from steerable._core._checkpoint import Checkpoint
from steerable._messages import Message
from steerable.errors import CheckpointError
from steerable.storage import JSONLSessionStore, checkpoint_from_record, checkpoint_to_record
from tests.conftest import of, wait_for

K = EventKind


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return InMemorySessionStore() if request.param == "memory" else JSONLSessionStore(tmp_path)


def looks(*keys: str, usage: Usage | None = None) -> Reply:
    return Reply(tool_calls=[("look", {"key": k}) for k in keys], usage=usage)


async def cancelled_after(store: Any, script: list[Reply], limits: Limits,
                          model: str | None = None) -> AgentLoop:
    """Run ``script`` until the first tool starts, then cancel after the tools: the turn is
    left pending in ``store`` with what it spent so far."""
    gate = asyncio.Event()

    @tool(read_only=True)
    async def look(key: str, ctx: ToolContext) -> str:
        """Look something up."""
        await gate.wait()
        return f"{key}: found"

    loop = AgentLoop(Agent(provider=ScriptedProvider(script), tools=[look], model=model),
                     store=store, limits=limits)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    gate.set()
    assert (await handle).status is TurnStatus.CANCELLED
    await loop.aclose()
    return loop


def resumed_loop(store: Any, script: list[Reply], limits: Limits,
                 model: str | None = None) -> tuple[AgentLoop, ScriptedProvider]:
    @tool(read_only=True)
    async def look(key: str) -> str:
        """Look something up."""
        return f"{key}: found"

    provider = ScriptedProvider(script)
    return AgentLoop(Agent(provider=provider, tools=[look], model=model), store=store,
                     limits=limits), provider


async def test_tool_calls_spent_before_a_cancel_count_after_the_resume(store: Any) -> None:
    limits = Limits(max_tool_calls=3)
    await cancelled_after(store, [looks("a", "b")], limits)
    assert store.load_checkpoint("s").tool_calls == 2
    loop, provider = resumed_loop(store, [looks("c", "d"), Reply(text="stopped")], limits)
    sub = loop.subscribe(buffer=1000)
    result = await loop.resume("s")  # type: ignore[misc]
    await loop.aclose()
    events = sub.drain_nowait()
    # 2 before the cancel + 1 admitted now = the limit of 3: "d" is refused, not run
    assert [e.arguments["key"] for e in of(events, K.TOOL_EXEC_START)] == ["c"]
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    assert "max_tool_calls=3: 1 call(s) refused" in of(events, K.INTERRUPT_RECEIVED)[0].hint


async def test_cost_and_cache_counts_carry_over_a_resume(store: Any) -> None:
    pytest.importorskip("genai_prices", reason="the prices extra (genai-prices) is not installed")
    limits = Limits(max_turn_cost_usd=0.15)
    first = Usage(600_000, 10_000, 400_000)  # $0.066 for gpt-4o-mini (400k cached)
    await cancelled_after(store, [looks("a", usage=first)], limits, model="gpt-4o-mini")
    cp = store.load_checkpoint("s")
    assert cp.cached_tokens == 400_000 and cp.cost_usd == pytest.approx(0.066)
    # the next call alone stays under the limit; with the first one it crosses it
    loop, _ = resumed_loop(store, [looks("b", usage=Usage(600_000, 1_000)),  # $0.0906
                                   Reply(text="summary", usage=Usage(1_000, 10))],
                           limits, model="gpt-4o-mini")
    result = await loop.resume("s")  # type: ignore[misc]
    await loop.aclose()
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    assert result.usage.cached_tokens == 400_000
    assert result.usage.cost_usd == pytest.approx(0.066 + 0.0906 + 0.000156)


def _checkpoint(**spent: Any) -> Checkpoint:
    return Checkpoint(session_id="s", turn_id="t", origin_turn_id="t", agent="a", tools=(),
                      input="go", stage="model", iteration=1,
                      messages=(Message("user", "go"),), **spent)


@given(cached=st.integers(0, 10**9), write=st.integers(0, 10**9), calls=st.integers(0, 10**4),
       cost=st.none() | st.floats(0, 1e6, allow_nan=False))
def test_what_was_spent_survives_the_storage_form(cached: int, write: int, calls: int,
                                                  cost: float | None) -> None:
    cp = _checkpoint(cached_tokens=cached, cache_write_tokens=write, tool_calls=calls,
                     cost_usd=cost)
    back = checkpoint_from_record(checkpoint_to_record(cp), where="test")
    assert (back.cached_tokens, back.cache_write_tokens, back.tool_calls, back.cost_usd) == (
        cached, write, calls, cost)


def test_an_older_checkpoint_without_the_counts_resumes_at_zero() -> None:
    raw = checkpoint_to_record(_checkpoint())
    assert not {"cached_tokens", "cache_write_tokens", "tool_calls", "cost_usd"} & raw.keys()
    back = checkpoint_from_record(raw, where="test")
    assert (back.tool_calls, back.cost_usd) == (0, None)


@pytest.mark.parametrize("field, bad", [("tool_calls", "2"), ("tool_calls", True),
                                        ("cost_usd", "0.1"), ("cost_usd", False)])
def test_a_corrupt_count_is_a_clear_checkpoint_error(field: str, bad: Any) -> None:
    raw = checkpoint_to_record(_checkpoint()) | {field: bad}
    with pytest.raises(CheckpointError, match=f"corrupt .*{field}"):
        checkpoint_from_record(raw, where="the file")


async def test_cache_write_tokens_carry_over_a_resume(store: Any) -> None:
    await cancelled_after(store, [looks("a", usage=Usage(100, 10, 20, 50))], Limits())
    assert store.load_checkpoint("s").cache_write_tokens == 50
    loop, _ = resumed_loop(store, [Reply(text="done", usage=Usage(100, 5, 0, 7))], Limits())
    result = await loop.resume("s")  # type: ignore[misc]
    await loop.aclose()
    assert (result.usage.cached_tokens, result.usage.cache_write_tokens) == (20, 57)
