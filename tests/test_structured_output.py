"""Structured output with the scripted provider: Agent(output_type=T), the check of the final
answer, retries with the errors shown to the model, and how steering, interrupts and the
iteration budget meet it. (The wire forms are tested in tests/providers/test_structured_wire.)"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Message,
    Reply,
    ScriptedProvider,
    TurnStatus,
    Usage,
    tool,
)
from steerable.errors import ConfigurationError, OutputValidationError

K = EventKind


class City(BaseModel):
    name: str
    population: int


class Country(BaseModel):
    name: str
    capital: City


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Movie(TypedDict):
    title: str
    year: int


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} has 2,100,000 people"


def agent(script: list[Any], **kw: Any) -> Agent:
    return Agent(provider=ScriptedProvider(script), **kw)


async def run(a: Agent, prompt: str = "go") -> Any:
    loop = AgentLoop(a)
    try:
        return await loop.run_turn(prompt, session_id="s")
    finally:
        await loop.aclose()


@pytest.mark.parametrize(("output_type", "text", "value"), [
    (City, '{"name": "Paris", "population": 2100000}', City(name="Paris", population=2100000)),
    (Point, '{"x": 1.5, "y": -2}', Point(1.5, -2.0)),
    (Movie, '{"title": "Heat", "year": 1995}', {"title": "Heat", "year": 1995}),
    (list[int], '{"value": [1, 2, 3]}', [1, 2, 3]),
    (list[int], "[4, 5]", [4, 5]),  # the bare value of a wrapped type is taken too
    (Country, '```json\n{"name": "France", "capital": {"name": "Paris", "population": 2}}\n```',
     Country(name="France", capital=City(name="Paris", population=2))),
])
async def test_the_final_answer_is_validated_into_result_output(output_type: Any, text: str,
                                                                value: Any) -> None:
    provider = ScriptedProvider([Reply(text=text)])
    result = await run(Agent(provider=provider, output_type=output_type))
    assert result.status is TurnStatus.COMPLETED
    assert result.output == value
    assert result.text == text
    (request,) = provider.requests
    assert request.answer_schema is not None and request.answer_schema["type"] == "object"


def test_schemas_are_objects_and_wrapped_types_keep_their_definitions() -> None:
    plain = Agent(provider=ScriptedProvider([]), output_type=City).output
    assert plain is not None and not plain.wrapped
    assert plain.schema["required"] == ["name", "population"]
    nested = Agent(provider=ScriptedProvider([]), output_type=list[Country]).output
    assert nested is not None and nested.wrapped
    # "#/$defs/City" must still resolve from the root of the wrapped schema
    assert set(nested.schema["$defs"]) == {"City", "Country"}
    assert nested.schema["properties"]["value"]["items"] == {"$ref": "#/$defs/Country"}
    # The wrapper is an object holding only "value" (strict schemas need every key named).
    assert {k: v for k, v in nested.schema.items() if k != "$defs"} == {
        "type": "object", "properties": {"value": {"type": "array",
                                                  "items": {"$ref": "#/$defs/Country"}}},
        "required": ["value"], "additionalProperties": False}
    # The type itself is kept: an agent rebuilt elsewhere (a Temporal worker) is given it.
    assert nested.type == list[Country] and plain.type is City


def test_bad_output_configuration_is_refused_at_once() -> None:
    with pytest.raises(ConfigurationError, match="output_retries"):
        Agent(provider=ScriptedProvider([]), output_type=City, output_retries=-1)
    with pytest.raises(ConfigurationError, match="has no JSON schema"):
        Agent(provider=ScriptedProvider([]), output_type=asyncio.Event)


async def test_an_invalid_answer_is_asked_again_with_the_errors() -> None:
    provider = ScriptedProvider([
        Reply(text='{"name": "Paris"}', usage=Usage(100, 10)),
        Reply(text='{"name": "Paris", "population": "many"}', usage=Usage(130, 12)),
        Reply(text='{"name": "Paris", "population": 2100000}', usage=Usage(160, 11)),
    ])
    loop = AgentLoop(Agent(provider=provider, output_type=City))
    result = await loop.run_turn("largest city?", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert result.output == City(name="Paris", population=2100000)
    assert result.iterations == 3
    assert result.usage == Usage(390, 33)  # every try is paid for
    second, third = provider.requests[1].messages, provider.requests[2].messages
    assert second[-2].role == "assistant" and second[-1].role == "user"
    assert "population: Field required" in second[-1].content
    assert "population: Input should be a valid integer" in third[-1].content
    assert second[-1].content == (
        "Your answer is not a valid City:\n- population: Field required\nAnswer again with "
        "only the JSON value, matching the schema you were given.")
    # the history keeps the exchange as it happened
    roles = [m.role for m in loop.session_messages("s")]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    await loop.aclose()


async def test_when_retries_run_out_the_turn_ends_in_error() -> None:
    provider = ScriptedProvider([Reply(text="Paris, about two million."),
                                 Reply(text='{"name": 3}')])
    loop = AgentLoop(Agent(provider=provider, output_type=City, output_retries=1))
    sub = loop.subscribe()
    result = await loop.run_turn("largest city?", session_id="s")
    assert result.status is TurnStatus.ERROR and result.output is None
    assert isinstance(result.error, OutputValidationError)
    assert result.error.text == '{"name": 3}'
    assert {e["loc"] for e in result.error.errors} == {("name",), ("population",)}
    assert "not a valid City after 1 retry" in str(result.error)
    assert str(result.error) == (
        "the final answer is not a valid City after 1 retry (no retry was left):\n"
        "- name: Input should be a valid string\n- population: Field required")
    errors = [e for e in sub.drain_nowait() if e.kind is K.ERROR]
    assert any("OutputValidationError" in e.message for e in errors)
    assert "(the whole value): Invalid JSON" in provider.requests[1].messages[-1].content
    # the consistent prefix is kept, as for any error
    assert [m.role for m in loop.session_messages("s")] == ["user", "assistant", "user",
                                                            "assistant"]
    await loop.aclose()


async def test_no_retry_with_output_retries_zero() -> None:
    result = await run(agent([Reply(text="{}")], output_type=City, output_retries=0))
    assert result.status is TurnStatus.ERROR
    assert "after 0 retries (no retry was left)" in str(result.error)


async def test_tools_first_then_the_answer_and_every_answer_call_carries_the_schema() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("lookup", {"key": "Paris"})]),
        Reply(text='{"name": "Paris", "population": 2100000}'),
    ])
    result = await run(Agent(provider=provider, tools=[lookup], output_type=City))
    assert result.output == City(name="Paris", population=2100000)
    assert [r.answer_schema is not None for r in provider.requests] == [True, True]
    assert [t.name for t in provider.requests[0].tools] == ["lookup"]


async def test_steering_before_the_final_answer_just_continues() -> None:
    loop_ref: list[AgentLoop] = []

    def steer_then_answer(request: Any) -> Reply:
        loop_ref[0].inject_steering("Use the official figure.", session_id="s")
        return Reply(text="Let me think about which figure...")  # not JSON, not checked

    provider = ScriptedProvider([steer_then_answer,
                                 Reply(text='{"name": "Paris", "population": 2102650}')])
    loop = AgentLoop(Agent(provider=provider, output_type=City))
    loop_ref.append(loop)
    result = await loop.run_turn("largest city?", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert result.output == City(name="Paris", population=2102650)
    last = provider.requests[1].messages[-1]
    assert last == Message("user", "Use the official figure.")  # no correction was asked
    await loop.aclose()


async def test_a_graceful_interrupts_summary_is_not_forced_into_the_schema() -> None:
    loop_ref: list[AgentLoop] = []
    started = asyncio.Event()

    @tool(read_only=True)
    async def slow(key: str) -> str:
        """Take a while."""
        started.set()
        await asyncio.sleep(0.05)
        return "ok"

    provider = ScriptedProvider([Reply(tool_calls=[("slow", {"key": "a"})]),
                                 Reply(text="I looked up a; nothing else was done.")])
    loop = AgentLoop(Agent(provider=provider, tools=[slow], output_type=City))
    loop_ref.append(loop)
    turn = loop.start_turn("go", session_id="s")
    await started.wait()
    assert loop.interrupt_graceful(session_id="s")
    result = await turn
    assert result.status is TurnStatus.INTERRUPTED
    assert result.output is None and result.error is None
    assert result.text == "I looked up a; nothing else was done."
    assert provider.requests[0].answer_schema is not None
    assert provider.requests[1].answer_schema is None and provider.requests[1].tool_choice.mode == "none"
    await loop.aclose()


async def test_the_last_iteration_must_validate_with_no_retry_left() -> None:
    good = '{"name": "Paris", "population": 1}'
    result = await run(agent([Reply(tool_calls=[("lookup", {"key": "a"})]), Reply(text=good)],
                             tools=[lookup], output_type=City, max_iterations=2))
    assert result.status is TurnStatus.MAX_ITERATIONS
    assert result.output == City(name="Paris", population=1)

    result = await run(agent([Reply(text="nope"), Reply(text="still no")],
                             output_type=City, max_iterations=2))
    assert result.status is TurnStatus.ERROR
    assert "the iteration budget was used up" in str(result.error)


async def test_a_subagents_structured_answer_reaches_the_parent_as_its_text() -> None:
    kid = Agent(name="finder", description="finds cities", output_type=City,
                provider=ScriptedProvider([Reply(text="Paris"),
                                           Reply(text='{"name": "Paris", "population": 5}')]))
    main = agent([Reply(tool_calls=[("subagent", {"agent": "finder", "task": "find"})]),
                  Reply(text="done")], subagents=[kid])
    loop = AgentLoop(main)
    sub = loop.subscribe()
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    child_end = next(e for e in sub.drain_nowait()
                     if e.kind is K.TURN_END and e.parent_turn_id == result.turn_id)
    assert json.loads(child_end.text) == {"name": "Paris", "population": 5}
    tool_result = next(m for m in loop.session_messages("s") if m.role == "tool")
    assert json.loads(tool_result.content) == {"name": "Paris", "population": 5}
    await loop.aclose()


# -- the mechanism: any text is either a value, a retry, or the one clear error ------------------

@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=hs.text(max_size=20), population=hs.integers(-10**12, 10**12),
       fence=hs.booleans(), pad=hs.sampled_from(["", " ", "\n", "\n\n  "]))
def test_any_valid_value_round_trips_through_the_check(name: str, population: int,
                                                       fence: bool, pad: str) -> None:
    spec = Agent(provider=ScriptedProvider([]), output_type=City).output
    assert spec is not None
    text = City(name=name, population=population).model_dump_json()
    if fence:
        text = f"```json\n{text}\n```"
    assert spec.parse(pad + text + pad) == City(name=name, population=population)


def _nested(inner: hs.SearchStrategy[Any]) -> hs.SearchStrategy[Any]:
    # A named function: hypothesis reads an ``extend`` function's source to check that it
    # recurses, and a lambda split over lines reads as one that does not (a warning, an error
    # here).
    return hs.lists(inner, max_size=3) | hs.dictionaries(hs.text(max_size=5), inner, max_size=3)


@settings(max_examples=200)
@given(text=hs.one_of(hs.text(max_size=60),
                      hs.recursive(hs.none() | hs.booleans() | hs.integers() | hs.text(max_size=5),
                                   _nested, max_leaves=8).map(json.dumps)))
def test_any_text_is_a_value_or_a_clear_validation_error(text: str) -> None:
    for output_type in (City, list[int]):
        spec = Agent(provider=ScriptedProvider([]), output_type=output_type).output
        assert spec is not None
        try:
            spec.parse(text)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            assert str(exc)
