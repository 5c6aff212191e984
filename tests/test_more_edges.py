"""More edges seen from outside: what a revoked queued message's awaitable says, a question's
schema and its cancelled end in the events, the kind of a message kept for a parked turn, a
turn's cache-token accounting, a before_llm rewrite keeping what it did not change, and a
composite's grace refused by its text."""

from __future__ import annotations

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
from tests.conftest import held_tool, of, wait_for

K = EventKind


async def test_a_revoked_queued_message_says_so_to_whoever_awaits_it() -> None:
    hold, gate = held_tool()

    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})]), Reply(text="ok")])))
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    queued = loop.send("second", "s", "follow_up")
    assert loop.revoke_message(queued.message_id)
    assert queued.state is MessageState.REVOKED
    revoked = [e for e in sub.drain_nowait() if e.kind is K.MESSAGE_STATE
               and e.message_id == queued.message_id and e.state is MessageState.REVOKED]
    assert [e.detail for e in revoked] == ["withdrawn by the caller"]
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


async def test_without_checkpoints_messages_waiting_for_a_slot_write_nothing() -> None:
    from steerable import Limits

    hold, gate = held_tool()

    store = InMemorySessionStore()
    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})]), Reply(text="a"), Reply(text="b")])),
        store=store, checkpoints=False, limits=Limits(active_turns=1))
    sub = loop.subscribe()
    first = loop.start_turn("for a", session_id="a")
    await wait_for(sub, K.TOOL_EXEC_START)
    waiting = loop.send("for b", "b")
    assert waiting.state is MessageState.QUEUED and store.load_checkpoint("b") is None
    gate.set()
    await first
    assert (await waiting).text == "b"  # type: ignore[misc]
    assert of(sub.drain_nowait(), K.ERROR) == []
    await loop.aclose()


async def test_a_queued_message_runs_with_the_agent_it_was_sent_with() -> None:
    hold, gate = held_tool()

    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})]), Reply(text="from a")])))
    other = Agent(name="other", provider=ScriptedProvider([Reply(text="from other")]))
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    queued = loop.send("second", "s", "follow_up", agent=other)
    assert (queued.handle, queued.turn_id) == (None, None)  # its turn has not started
    gate.set()
    await first  # type: ignore[misc]
    assert (await queued).text == "from other"  # type: ignore[misc]
    assert queued.handle is not None and queued.handle.turn_id == queued.turn_id
    starts = [(e.input, e.agent) for e in of(sub.drain_nowait(), K.TURN_START)]
    assert starts == [("second", "other")]
    await loop.aclose()


async def test_a_message_with_parts_to_an_idle_session_gets_a_message_id() -> None:
    from steerable import ImagePart, TextPart

    provider = ScriptedProvider([Reply(text="a cat")])
    loop = AgentLoop(Agent(name="a", provider=provider))
    handle = loop.send([TextPart("what is this?"), ImagePart(url="https://x.test/cat.png")],
                       "s")
    assert isinstance(handle.message_id, str) and handle.message_id.startswith("msg_")
    assert (await handle).text == "a cat"  # type: ignore[misc]
    await loop.aclose()


async def test_a_message_with_no_turn_to_take_it_keeps_its_text() -> None:
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider([])))
    for r, kind in ((loop.inject_steering("hello", "s"), "steer"),
                    (loop.inject_follow_up("later", "s"), "follow_up")):
        assert not r and (r.kind, r.state, r.session_id) == (kind, MessageState.REJECTED, "s")
    assert [r.text for r in (loop.inject_steering("a", "s"), loop.inject_follow_up("b", "s"))
            ] == ["a", "b"]
    await loop.aclose()


async def test_a_finished_turn_has_no_handle_and_ids_have_one_shape() -> None:
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider([Reply(text="ok")])))
    handle = loop.start_turn("go", session_id="s")
    assert loop.turn_handle(handle.turn_id) is not None
    await handle
    assert loop.turn_handle(handle.turn_id) is None
    assert re.fullmatch(r"turn_[0-9a-f]{12}", handle.turn_id)
    await loop.aclose()


async def test_steering_a_turn_of_a_loop_without_checkpoints_writes_nothing() -> None:
    hold, gate = held_tool()

    store = InMemorySessionStore()
    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})]), Reply(text="ok")])), store=store, checkpoints=False)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.inject_steering("more", "s") and store.load_checkpoint("s") is None
    gate.set()
    assert (await handle).status is TurnStatus.COMPLETED
    await loop.aclose()



def test_an_agents_defaults_are_the_documented_ones() -> None:
    agent = Agent(provider=ScriptedProvider([]), output_type=int)
    assert (agent.name, agent.instructions, agent.max_iterations, agent.dry_run, agent.model,
            agent.context_window, agent.summary, agent.description, agent.tools) == (
        "agent", "", 20, False, None, None, None, "", ())
    assert agent.output is not None and agent.output.retries == 2


async def test_a_turn_that_fails_reports_the_error_on_it() -> None:
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider(
        [Reply(error=RuntimeError("provider down"))])))
    sub = loop.subscribe([K.ERROR])
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ERROR
    assert [(e.source, e.turn_id) for e in sub.drain_nowait()][-1] == ("turn", result.turn_id)
    await loop.aclose()


async def test_closing_the_loop_fails_what_waits_with_the_reason() -> None:
    hold, gate = held_tool()

    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})])])))
    sub = loop.subscribe()
    loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    waiting = loop.send("second", "s", "follow_up")
    await loop.aclose()
    assert waiting.state is MessageState.REJECTED
    with pytest.raises(RuntimeError,
                       match=r"^the loop closed before this message's turn started$"):
        await waiting  # type: ignore[misc]
