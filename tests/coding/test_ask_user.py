"""The coding agent's ask_user tool: short, two simple arguments, built on ctx.ask."""

from __future__ import annotations

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable.coding import make_ask_user_tool
from tests.conftest import wait_for


def test_its_schema_is_small_enough_for_a_small_model() -> None:
    spec = make_ask_user_tool().spec()
    assert spec.name == "ask_user" and spec.read_only
    assert set(spec.parameters["properties"]) == {"question", "choices"}
    assert spec.parameters["required"] == ["question"]
    assert len(spec.description) < 120


async def test_the_model_asks_and_reads_the_answer() -> None:
    calls = [("ask_user", {"question": " Which file? ", "choices": ["a.py", "", "b.py", "a.py"]})]
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(tool_calls=calls), Reply(text="ok")]),
                           tools=[make_ask_user_tool()]))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, EventKind.QUESTION_ASKED)
    assert (asked.question, asked.choices) == ("Which file?", ("a.py", "b.py"))
    loop.answer(asked.request_id, "b.py")
    result = await handle
    assert result.messages[2].content == "The user answered: b.py"
    await loop.aclose()


async def test_no_choices_means_a_free_answer() -> None:
    calls = [("ask_user", {"question": "Name?", "choices": []})]
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(tool_calls=calls), Reply(text="ok")]),
                           tools=[make_ask_user_tool()]))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, EventKind.QUESTION_ASKED)
    assert asked.choices is None
    loop.answer(asked.request_id, "Ada Lovelace")
    assert (await handle).messages[2].content == "The user answered: Ada Lovelace"
    await loop.aclose()
