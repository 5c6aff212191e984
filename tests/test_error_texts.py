"""The errors a caller or a tool meets elsewhere in the engine, each by its exact text:
permission rules, what a tool asks and what it is answered, a subscription read twice at
once, a loop asked about "the" turn while several run, a session that is busy."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    PermissionRule,
    Permissions,
    Reply,
    ScriptedProvider,
    ToolContext,
    tool,
)
from steerable.errors import InvalidAnswerError, SessionBusyError
from tests.conftest import held_tool, wait_for

K = EventKind


def exactly(error: type[Exception], text: str) -> Any:
    return pytest.raises(error, match=f"^{re.escape(text)}$")


def test_a_bad_permission_rule_is_refused_clearly() -> None:
    with exactly(ValueError, "permission must be allow, ask or deny, got 'maybe'"):
        PermissionRule.parse("maybe", "read")
    with exactly(TypeError, "permission pattern must be a str, got int"):
        PermissionRule.parse("allow", 3)  # type: ignore[arg-type]
    with exactly(ValueError, "bad permission pattern 'read(('; expected 'tool' or "
                 "'tool(argument-glob)'"):
        PermissionRule.parse("deny", "read((")
    with exactly(TypeError, "permission rules are PermissionRule or (action, pattern), "
                 "got 'allow read'"):
        Permissions(["allow read"])  # type: ignore[list-item]


BAD_ASKS: list[tuple[dict[str, Any], str]] = [
    ({"question": "  "}, "ctx.ask needs a non-empty question (a str)"),
    ({"question": "Pick", "choices": "ab"}, "ctx.ask: choices must be a non-empty list of "
     "strings"),
    ({"question": "Pick", "choices": []}, "ctx.ask: choices must be a non-empty list of "
     "strings"),
    ({"question": "Pick", "schema": ["int"]}, "ctx.ask: schema must be a JSON schema (a dict)"),
    ({"question": "Pick", "schema": {"type": 5}}, "ctx.ask: schema is not a valid JSON schema: "),
]


@pytest.mark.parametrize(("asked", "text"), BAD_ASKS)
async def test_a_tool_asking_wrongly_reads_why(asked: dict[str, Any], text: str) -> None:
    @tool(read_only=True)
    async def ask(ctx: ToolContext) -> str:
        """Ask."""
        return str(await ctx.ask(asked["question"], choices=asked.get("choices"),
                                 schema=asked.get("schema")))

    loop = AgentLoop(Agent(name="a", tools=[ask], provider=ScriptedProvider(
        [Reply(tool_calls=[("ask", {})]), Reply(text="ok")])))
    sub = loop.subscribe([K.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    (end,) = sub.drain_nowait()
    assert end.is_error and end.content.startswith(text)
    if not text.endswith(": "):
        assert end.content == text
    await loop.aclose()


@pytest.mark.parametrize(("kw", "answer", "text"), [
    ({}, 5, "this question takes a text answer (a str), got int"),
    ({}, object(), "an answer must be JSON data (str, number, bool, list, dict), got object"),
    ({"choices": ["S", "M"]}, "L", "'L' is not one of the choices ['S', 'M']; answer with one "
     "of them"),
    ({"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}, {"n": "x"},
     "the answer does not fit the question's schema at n: 'x' is not of type 'integer'"),
    ({"schema": {"type": "integer"}}, "x",
     "the answer does not fit the question's schema: 'x' is not of type 'integer'"),
])
async def test_a_wrong_answer_to_a_live_question_says_what_fits(
        kw: dict[str, Any], answer: Any, text: str) -> None:
    @tool(read_only=True)
    async def ask(ctx: ToolContext) -> str:
        """Ask."""
        return str(await ctx.ask("Well?", **kw))

    loop = AgentLoop(Agent(name="a", tools=[ask], provider=ScriptedProvider(
        [Reply(tool_calls=[("ask", {})]), Reply(text="ok")])))
    sub = loop.subscribe([K.QUESTION_ASKED])
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, K.QUESTION_ASKED)
    with exactly(InvalidAnswerError, text):
        loop.answer(asked.request_id, answer)
    handle.interrupt_hard()
    await handle
    await loop.aclose()


async def test_a_subscription_read_by_two_tasks_at_once_is_refused() -> None:
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider([])))
    sub = loop.subscribe()
    first = asyncio.ensure_future(sub.__anext__())
    await asyncio.sleep(0)
    with exactly(RuntimeError, "another task is already iterating this subscription"):
        await sub.__anext__()
    first.cancel()
    await loop.aclose()


async def test_the_turn_without_a_session_is_ambiguous_when_several_run() -> None:
    hold, gate = held_tool()

    loop = AgentLoop(Agent(name="a", tools=[hold], provider=ScriptedProvider(
        [Reply(tool_calls=[("hold", {})]), Reply(tool_calls=[("hold", {})]),
         Reply(text="1"), Reply(text="2")])))
    one, two = loop.start_turn("go", session_id="b"), loop.start_turn("go", session_id="a")
    with exactly(ValueError, "2 turns are active (sessions ['a', 'b']); pass session_id"):
        loop.inject_steering("which?")
    with exactly(SessionBusyError, f"session 'a' already has an active turn ({two.turn_id}); "
                 "steer it, queue a follow-up, or wait for it to end"):
        loop.start_turn("again", session_id="a")
    gate.set()
    await one
    await two
    await loop.aclose()
