"""Structured output and usage on the wire, against the loopback OpenAI-compatible and
Anthropic-format servers: what each provider sends for an answer schema, how the answer
comes back as text, and the cached-token counts each wire reports."""

from __future__ import annotations

import json

from loopback_llm import (
    LoopbackServer,
    anthropic_frames,
    openai_frames,
    stream,
)
from pydantic import BaseModel

from conftest import kinds, run_turn
from steerable import EventKind, TurnStatus, Usage, tool
from steerable.providers._retry import RetryPolicy
from steerable.providers.anthropic import AnthropicProvider
from steerable.providers.openai import OpenAIProvider
from steerable.providers.profiles import LLAMA_SERVER_QWEN

K = EventKind


class City(BaseModel):
    name: str
    population: int


PARIS = '{"name": "Paris", "population": 2100000}'


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} has 2,100,000 people"


def openai(server: LoopbackServer, retry: RetryPolicy, **options: object) -> OpenAIProvider:
    return OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test", model="gpt-test",
                          retry=retry, environ={}, **options)  # type: ignore[arg-type]


def anthropic(server: LoopbackServer, retry: RetryPolicy) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.url, api_key="sk-ant-test", model="claude-test",
                             retry=retry, environ={})


# -- OpenAI-compatible ----------------------------------------------------------------------

async def test_openai_sends_response_format_and_reads_cached_tokens(server, retry):
    server.add(stream(openai_frames([PARIS[:20], PARIS[20:]], usage=(1200, 14),
                                    usage_extra={"prompt_tokens_details": {"cached_tokens": 1024}})))
    result, events = await run_turn(openai(server, retry), "largest city?", output_type=City)
    assert result.status is TurnStatus.COMPLETED
    assert result.output == City(name="Paris", population=2100000)
    (request,) = server.requests
    assert request.body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "answer", "schema": City.model_json_schema()}}
    assert result.usage == Usage(1200, 14, 1024)
    assert "".join(e.text for e in kinds(events, K.LLM_DELTA)) == PARIS


async def test_openai_retry_sends_the_errors_and_usage_sums(server, retry):
    server.add(stream(openai_frames(['{"name": "Paris"}'], usage=(100, 5))),
               stream(openai_frames([PARIS], usage=(150, 9))))
    result, _ = await run_turn(openai(server, retry), "largest city?", output_type=City)
    assert result.output == City(name="Paris", population=2100000)
    assert result.usage == Usage(250, 14)
    second = server.requests[1].body
    assert second["messages"][-2] == {"role": "assistant", "content": '{"name": "Paris"}'}
    assert "population: Field required" in second["messages"][-1]["content"]
    assert "response_format" in second


async def test_a_text_call_model_gets_the_calls_beside_the_answer_schema(server, retry):
    # llama-server's schema constrains the whole reply: without the calls in it a model that
    # writes its calls as text could never call a tool again.
    server.add(stream(openai_frames(['{"name": "lookup", "arguments": {"key": "Paris"}}'])),
               stream(openai_frames([PARIS], usage=(300, 20),
                                    end_extra={"timings": {"cache_n": 256, "prompt_n": 44}})))
    p = openai(server, retry, profile=LLAMA_SERVER_QWEN)
    result, events = await run_turn(p, "largest city?", tools=[lookup], output_type=City)
    assert [e.tool_name for e in kinds(events, K.TOOL_EXEC_END)] == ["lookup"]
    assert result.output == City(name="Paris", population=2100000)
    schema = server.requests[0].body["response_format"]["json_schema"]["schema"]
    first, answer = schema["oneOf"]
    assert first["properties"]["name"] == {"const": "lookup"}
    assert answer == City.model_json_schema()
    assert result.usage is not None and result.usage.cached_tokens == 256  # timings.cache_n


async def test_openai_reports_the_model_that_answered_for_pricing(server, retry):
    server.add(stream(openai_frames(["hi"])))
    result, events = await run_turn(openai(server, retry), "hi")
    (response,) = kinds(events, K.LLM_RESPONSE)
    # a loopback server is no API the price table knows: no price, never a guess
    assert response.usage == Usage(11, 7) and response.usage.cost_usd is None
    assert result.status is TurnStatus.COMPLETED


# -- Anthropic: a final-answer tool ---------------------------------------------------------

async def test_anthropic_forces_the_final_answer_tool_and_reads_it_as_text(server, retry):
    server.add(stream(anthropic_frames(
        stop_reason="tool_use", usage=(40, 12), cache=(300, 20),
        tool_uses=[("toolu_1", "final_answer", [PARIS[:15], PARIS[15:]])])))
    result, events = await run_turn(anthropic(server, retry), "largest city?", output_type=City)
    assert result.status is TurnStatus.COMPLETED
    assert result.output == City(name="Paris", population=2100000)
    assert result.text == PARIS
    deltas = [e.text for e in kinds(events, K.LLM_DELTA)]
    assert "".join(deltas) == PARIS and len(deltas) > 1  # streamed as it is written
    assert not kinds(events, K.TOOL_CALL_DELTA, K.TOOL_EXEC_START)
    (response,) = kinds(events, K.LLM_RESPONSE)
    assert response.finish_reason == "end_turn" and response.tool_calls == ()
    body = server.requests[0].body
    (answer_tool,) = body["tools"]
    assert answer_tool["name"] == "final_answer"
    assert answer_tool["input_schema"] == City.model_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    # cache reads and writes are prompt tokens too
    assert result.usage == Usage(40 + 300 + 20, 12, 300, 20)


async def test_anthropic_with_tools_must_call_one_and_answers_through_the_tool(server, retry):
    server.add(
        stream(anthropic_frames(stop_reason="tool_use",
                                tool_uses=[("toolu_1", "lookup", ['{"key": "Paris"}'])])),
        stream(anthropic_frames(stop_reason="tool_use",
                                tool_uses=[("toolu_2", "final_answer", [PARIS])])))
    result, events = await run_turn(anthropic(server, retry), "largest city?", tools=[lookup],
                                    output_type=City)
    assert result.output == City(name="Paris", population=2100000)
    assert [e.tool_name for e in kinds(events, K.TOOL_EXEC_END)] == ["lookup"]
    first, second = (r.body for r in server.requests)
    assert [t["name"] for t in first["tools"]] == ["lookup", "final_answer"]
    assert first["tool_choice"] == {"type": "any"}
    # the history sends the answer back as the text it became, with no dangling tool_use
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"


async def test_anthropic_answer_tool_given_whole_and_a_name_clash(server, retry):
    @tool(name="final_answer", read_only=True)
    async def own_final_answer(text: str) -> str:
        """The agent's own tool of that name."""
        return text

    frames = anthropic_frames(stop_reason="tool_use",
                              tool_uses=[("toolu_1", "final_answer_", [])])
    # the whole input in the block's start, no input_json_delta pieces
    frames[2] = frames[2].replace(b'"input": {}', b'"input": ' + PARIS.encode())
    server.add(stream(frames))
    result, _ = await run_turn(anthropic(server, retry), "go", tools=[own_final_answer],
                               output_type=City)
    assert result.output == City(name="Paris", population=2100000)
    assert json.loads(result.text) == json.loads(PARIS)
    names = [t["name"] for t in server.requests[0].body["tools"]]
    assert names == ["final_answer", "final_answer_"]


async def test_anthropic_summary_of_an_interrupt_gets_no_answer_tool(server, retry):
    server.add(stream(anthropic_frames(["Nothing done."])))
    p = anthropic(server, retry)
    from steerable import Agent, AgentLoop
    loop = AgentLoop(Agent(provider=p, output_type=City))
    turn = loop.start_turn("go", session_id="s")
    assert loop.interrupt_graceful(session_id="s")
    result = await turn
    await p.aclose()
    assert result.status is TurnStatus.INTERRUPTED and result.output is None
    assert "tools" not in server.requests[0].body
    assert "tool_choice" not in server.requests[0].body
