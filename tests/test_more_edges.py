"""More edges seen from outside: what a revoked queued message's awaitable says, a question's
schema and its cancelled end in the events, the kind of a message kept for a parked turn, a
turn's cache-token accounting, a before_llm rewrite keeping what it did not change, and a
composite's grace refused by its text."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HookAction,
    HookDecision,
    InMemorySessionStore,
    LLMRequest,
    MessageState,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    Usage,
    tool,
)
from steerable.errors import ConfigurationError
from tests.conftest import of, wait_for

K = EventKind


async def test_a_revoked_queued_message_says_so_to_whoever_awaits_it() -> None:
    gate = asyncio.Event()

    @tool(read_only=True)
    async def hold() -> str:
        """Hold."""
        await gate.wait()
        return "held"

    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})]), Reply(text="ok")])))
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    queued = loop.send("second", "s", "follow_up")
    assert loop.revoke_message(queued.message_id)
    assert queued.state is MessageState.REVOKED
    with pytest.raises(RuntimeError, match=r"^the message was revoked before its turn started$"):
        await queued  # type: ignore[misc]
    gate.set()
    await first  # type: ignore[misc]
    await loop.aclose()


async def test_a_question_shows_its_schema_and_a_cancelled_one_says_which_tool() -> None:
    schema = {"type": "integer", "minimum": 1}

    @tool(read_only=True)
    async def count(ctx: ToolContext) -> str:
        """Ask for a number."""
        return str(await ctx.ask("How many?", schema=schema))

    loop = AgentLoop(Agent(name="a", tools=[count], provider=ScriptedProvider(
        [Reply(tool_calls=[("count", {})])])))
    sub = loop.subscribe([K.QUESTION_ASKED, K.QUESTION_ANSWERED])
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, K.QUESTION_ASKED)
    assert (asked.question, asked.choices, asked.schema) == ("How many?", None, schema)
    loop.interrupt_hard("s")
    assert (await handle).status is TurnStatus.ABORTED
    (answered,) = of(sub.drain_nowait(), K.QUESTION_ANSWERED)
    assert (answered.request_id, answered.call_id, answered.tool_name, answered.outcome,
            answered.value) == (asked.request_id, "call_1", "count", "cancelled", None)
    await loop.aclose()


async def test_messages_kept_for_a_parked_turn_keep_their_kind() -> None:
    from steerable import HumanApprover

    @tool
    def write(path: str) -> str:
        """Write."""
        return path

    store = InMemorySessionStore()
    loop = AgentLoop(Agent(name="a", tools=[write], provider=ScriptedProvider(
        [Reply(tool_calls=[("write", {"path": "a"})])])), store=store, park=True)
    loop.register_hook(HumanApprover())
    sub = loop.subscribe([K.MESSAGE_STATE])
    assert (await loop.run_turn("go", session_id="s")).status is TurnStatus.WAITING
    sub.drain_nowait()
    steer, later = loop.inject_steering("steer", "s"), loop.inject_follow_up("later", "s")
    assert (steer.kind, later.kind) == ("steer", "follow_up")
    assert [(e.message_kind, e.state) for e in sub.drain_nowait()] == [
        ("steer", MessageState.QUEUED), ("follow_up", MessageState.QUEUED)]
    await loop.aclose()


async def test_a_turn_adds_up_cached_and_cache_written_tokens_of_every_call() -> None:
    @tool(read_only=True)
    async def look() -> str:
        """Look."""
        return "seen"

    provider = ScriptedProvider([
        Reply(tool_calls=[("look", {})], usage=Usage(10, 2, cache_write_tokens=7)),
        Reply(tool_calls=[("look", {})], usage=Usage(10, 2, cached_tokens=5)),
        Reply(text="done", usage=Usage(10, 2, cached_tokens=3, cache_write_tokens=4))])
    loop = AgentLoop(Agent(name="a", tools=[look], provider=provider))
    result = await loop.run_turn("go", session_id="s")
    assert result.usage == Usage(30, 6, cached_tokens=8, cache_write_tokens=11)
    await loop.aclose()


async def test_a_before_llm_rewrite_keeps_what_it_does_not_change() -> None:
    """MODIFY with only ``tools`` (by name): the request keeps its answer schema, and the
    tools keep their read-only flags."""
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    @tool(read_only=True)
    async def look() -> str:
        """Look."""
        return "seen"

    @tool
    async def act() -> str:
        """Act."""
        return "done"

    class OnlyLook:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, tools=["look"])

    provider = ScriptedProvider([Reply(text='{"name": "Paris"}')])
    loop = AgentLoop(Agent(name="a", tools=[look, act], provider=provider, output_type=City))
    loop.register_hook(OnlyLook())
    result = await loop.run_turn("go", session_id="s")
    assert result.output == City(name="Paris")
    (request,) = provider.requests
    assert isinstance(request, LLMRequest) and request.answer_schema is not None
    assert [(t.name, t.read_only) for t in request.tools] == [("look", True)]
    await loop.aclose()


def test_a_composite_refuses_a_negative_grace_by_its_text() -> None:
    from steerable import ParallelAgent

    child = Agent(name="c", provider=ScriptedProvider([]))
    text = "ParallelAgent 'both': grace must be a number of seconds >= 0, got -1"
    with pytest.raises(ConfigurationError, match=f"^{re.escape(text)}$"):
        ParallelAgent(name="both", agents=[child], grace=-1)
