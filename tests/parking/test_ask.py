"""ctx.ask on a live loop: QUESTION_ASKED, answers checked against choices and schema."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, Timeouts, tool
from steerable.errors import InvalidAnswerError, UnknownRequestError
from steerable.tools import ToolContext
from tests.conftest import of, wait_for

K = EventKind


def make_loop(tool_fn: Any, **kw: Any) -> AgentLoop:
    script = [Reply(tool_calls=[(tool_fn.name, {})]), Reply(text="done")]
    return AgentLoop(Agent(provider=ScriptedProvider(script), tools=[tool_fn]), **kw)


@tool(read_only=True)
async def pick(ctx: ToolContext) -> str:
    """Ask for a colour."""
    return "picked " + await ctx.ask("Which colour?", choices=["red", "blue"])


@tool(read_only=True)
async def count(ctx: ToolContext) -> str:
    """Ask for a number."""
    value = await ctx.ask("How many?", schema={"type": "integer", "minimum": 1})
    return f"count={value}"


async def test_a_question_is_an_event_and_its_answer_the_tool_result() -> None:
    loop = make_loop(pick)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, K.QUESTION_ASKED)
    assert (asked.question, asked.choices, asked.schema) == ("Which colour?", ("red", "blue"), None)
    assert asked.call_id and asked.tool_name == "pick"
    assert asked.request_id.startswith("question_") and len(asked.request_id) >= 9 + 22
    [waiting] = loop.pending_requests()
    assert waiting.request_id == asked.request_id and waiting.question == "Which colour?"
    with pytest.raises(InvalidAnswerError, match="not one of the choices"):
        loop.answer(asked.request_id, "green")
    assert loop.pending_requests()  # a refused answer leaves the question open
    assert loop.answer(asked.request_id, "blue") is True
    result = await handle
    assert result.messages[2].content == "picked blue"
    events = sub.drain_nowait()
    [answered] = of(events, K.QUESTION_ANSWERED)
    assert (answered.value, answered.outcome) == ("blue", "answered")
    assert loop.pending_requests() == []
    await loop.aclose()


async def test_an_answer_failing_the_schema_is_refused_and_the_question_stays_open() -> None:
    loop = make_loop(count)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, K.QUESTION_ASKED)
    for bad in ("3", 0, 2.5, None):
        with pytest.raises(InvalidAnswerError, match="schema"):
            loop.answer(asked.request_id, bad)
    loop.answer(asked.request_id, 3)
    assert (await handle).messages[2].content == "count=3"
    await loop.aclose()


async def test_an_unanswered_live_question_fails_the_tool_after_the_timeout() -> None:
    loop = make_loop(pick, timeouts=Timeouts(approval=0.05))
    sub = loop.subscribe()
    result = await loop.run_turn("go", session_id="s")
    tool_msg = result.messages[2]
    assert tool_msg.is_error and "Nobody answered" in tool_msg.content
    assert [e.outcome for e in of(sub.drain_nowait(), K.QUESTION_ANSWERED)] == ["timed out"]
    await loop.aclose()


async def test_a_forged_or_unknown_request_id_is_refused() -> None:
    loop = make_loop(pick)
    with pytest.raises(UnknownRequestError):
        loop.answer("question_forged", "red")
    assert loop.resolve_approval("approval_forged", True) is False
    await loop.aclose()


async def test_request_ids_are_unguessable_and_distinct() -> None:
    from steerable._core._requests import new_request_id

    ids = {new_request_id("question") for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i.removeprefix("question_")) == 32 for i in ids)  # 16 random bytes, hex


async def test_a_hard_abort_closes_the_open_question() -> None:
    loop = make_loop(pick)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, K.QUESTION_ASKED)
    loop.interrupt_hard("s")
    await handle
    assert [e.outcome for e in of(sub.drain_nowait(), K.QUESTION_ANSWERED)] == ["cancelled"]
    with pytest.raises(UnknownRequestError):
        loop.answer(asked.request_id, "red")
    await asyncio.sleep(0)
    await loop.aclose()
