"""A request's ``ToolChoice`` in wire form: the provider translates it, it decides nothing."""

from __future__ import annotations

from typing import Any

import pytest
from loopback_llm import openai_frames, stream

from steerable import Agent, AgentLoop, HookAction, HookDecision, Message, TurnStatus, tool
from steerable.providers._base import ToolChoice
from steerable.providers._tool_wire import MAX_CALLS
from steerable.providers.openai import OpenAIProvider
from steerable.providers.profiles import ModelProfile

TEXT_CALLS = ModelProfile(name="text-calls", text_tool_calls=True, tool_results_as_user=True,
                          restate_request=True,
                          calls_in_history=False)
NATIVE = ModelProfile(name="native")


@tool(read_only=True)
async def read(path: str) -> str:
    """Read a file.

    Args:
        path: The file.
    """
    return f"contents of {path}"


@tool
async def edit(path: str) -> str:
    """Edit a file.

    Args:
        path: The file.
    """
    return f"edited {path}"


class Choose:
    """A before_llm hook that sets the given choices, one per call."""

    def __init__(self, *choices: ToolChoice) -> None:
        self.choices = list(choices)

    def before_llm(self, ctx: Any) -> HookDecision:
        return HookDecision(HookAction.MODIFY, tool_choice=self.choices.pop(0))


async def _turn(server: Any, retry: Any, profile: ModelProfile, prompt: str,
                *choices: ToolChoice) -> Any:
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=profile, retry=retry, environ={})
    loop = AgentLoop(Agent(provider=p, tools=[read, edit]))
    loop.register_hook(Choose(*choices))
    try:
        return await loop.run_turn(prompt, session_id="s")
    finally:
        await p.aclose()


def _names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body["tools"]]


async def test_a_text_call_model_gets_a_schema_of_the_allowed_calls_then_a_grammar(server,
                                                                                  retry):
    server.add(stream(openai_frames(['{"name": "read", "arguments": {"path": "a.txt"}}'])),
               stream(openai_frames(["It says: contents of a.txt"])))
    result = await _turn(server, retry, TEXT_CALLS, "what does a.txt say?",
                         ToolChoice("required", ("read",), 64), ToolChoice("none"))
    assert result.status is TurnStatus.COMPLETED and result.text == "It says: contents of a.txt"
    first, second = (r.body for r in server.requests)
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "array" and schema["minItems"] == 1
    calls = schema["items"]["oneOf"]
    assert [c["properties"]["name"] for c in calls] == [{"const": "read"}]
    assert calls[0]["properties"]["arguments"]["required"] == ["path"]
    # every tool stays listed (the same prompt prefix on every call, kept in the server cache)
    assert _names(first) == ["read", "edit"] and first["max_tokens"] == 64
    assert second["tool_choice"] == "none" and second["grammar"] == "root ::= [^{`<]*"
    assert second["messages"][-1] == {"role": "user", "content": (
        'Result of read({"path": "a.txt"}):\ncontents of a.txt\n\n'
        "My request was: what does a.txt say?\nAnswer it now in plain words, using these "
        "results.")}


async def test_a_required_reply_of_a_text_call_model_may_hold_several_calls(server, retry):
    # The list is the text-call form of parallel calls: both run, in one round.
    server.add(stream(openai_frames(['[{"name": "read", "arguments": {"path": "a.cfg"}},',
                                     ' {"name": "read", "arguments": {"path": "b.cfg"}}]'])),
               stream(openai_frames(["Both read."])))
    result = await _turn(server, retry, TEXT_CALLS, "compare a.cfg and b.cfg",
                         ToolChoice("required", ("read",)), ToolChoice("none"))
    assert result.status is TurnStatus.COMPLETED and result.text == "Both read."
    second = server.requests[1].body["messages"][-1]["content"]
    assert second.startswith('Result of read({"path": "a.cfg"}):\ncontents of a.cfg\n\n'
                             'Result of read({"path": "b.cfg"}):\ncontents of b.cfg\n\n')
    schema = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["maxItems"] == MAX_CALLS


async def test_a_required_call_holds_the_parameters_its_choice_gives_values_for(server, retry):
    # The tools are listed as they are (the cached prompt); only the call's schema narrows,
    # one schema per variant (a file and the lines an edit of it may quote).
    server.add(stream(openai_frames(['{"name": "read", "arguments": {"path": "a.txt"}}'])),
               stream(openai_frames(["ok"])))
    held = ToolChoice("required", ("read", "edit"), values=(
        ("read", (("path", ("a.txt", "b/c.txt")), ("nope", ("x",)))),
        ("edit", (("path", ("a.txt",)),)), ("edit", (("path", ("b/c.txt",)),))))
    await _turn(server, retry, TEXT_CALLS, "a?", held, ToolChoice("none"))
    body = server.requests[0].body
    entries = body["response_format"]["json_schema"]["schema"]["items"]["oneOf"]
    args = [e["properties"]["arguments"] for e in entries]
    assert [e["properties"]["name"]["const"] for e in entries] == ["read", "edit", "edit"]
    assert args[0]["properties"]["path"] == {"type": "string", "enum": ["a.txt", "b/c.txt"]}
    assert args[0]["required"] == ["path"] and "nope" not in args[0]["properties"]
    assert [a["properties"]["path"]["enum"] for a in args[1:]] == [["a.txt"], ["b/c.txt"]]
    listed = next(t for t in body["tools"] if t["function"]["name"] == "read")
    assert "enum" not in listed["function"]["parameters"]["properties"]["path"]


async def test_a_native_model_gets_tool_choice_and_only_the_allowed_tools(server, retry):
    server.add(stream(openai_frames(["ok"])), stream(openai_frames(["ok"])))
    await _turn(server, retry, NATIVE, "what does a.txt say?",
                ToolChoice("required", ("read",)))
    await _turn(server, retry, NATIVE, "hi", ToolChoice("auto"))
    required, auto = (r.body for r in server.requests)
    assert required["tool_choice"] == "required" and _names(required) == ["read"]
    assert "response_format" not in required
    assert "tool_choice" not in auto and _names(auto) == ["read", "edit"]


async def test_a_choice_that_allows_no_offered_tool_is_none(server, retry):
    server.add(stream(openai_frames(["ok"])))
    await _turn(server, retry, NATIVE, "hi", ToolChoice("required", ("bash",)))
    assert server.requests[0].body["tool_choice"] == "none"


async def test_steering_adds_to_the_restated_request(server, retry):
    server.add(stream(openai_frames(["ok"])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=TEXT_CALLS, retry=retry,
                       environ={})
    from steerable._messages import ToolCall
    from steerable.providers._base import LLMRequest
    call = ToolCall("c1", "read", {"path": "a.txt"})
    messages = [Message("user", "what does a.txt say?"),
                Message("assistant", "", tool_calls=(call,)),
                Message("user", "and in French please"),
                Message("tool", "contents", tool_call_id="c1", name="read")]
    specs = Agent(provider=p, tools=[read]).tool_specs
    async for _ in p.stream(LLMRequest(messages=messages, tools=specs,
                                       tool_choice=ToolChoice("none"))):
        pass
    await p.aclose()
    last = server.requests[0].body["messages"][-1]["content"]
    assert last.endswith("My request was: what does a.txt say?\nand in French please\n"
                         "Answer it now in plain words, using these results.")


def test_a_results_message_with_a_call_still_allowed_invites_the_answer_first():
    # "Go on with it" after a look that showed the answer drew steps from the 1.5B.
    from steerable.providers._tool_wire import restate_request
    wire = [{"role": "user", "content": "Result of read(...):\ntimeout = 21"}]
    restate_request(wire, [Message("user", "same timeout?")], answer_now=False)
    assert wire[-1]["content"].endswith(
        "My request was: same timeout?\nIf these results are enough, answer it now in plain "
        "words; if not, call a tool.")


def test_a_tool_choice_is_checked():
    with pytest.raises(ValueError, match="auto, none or required"):
        ToolChoice("sometimes")  # type: ignore[arg-type]
    assert ToolChoice("none", None).allows("read") is False
    assert ToolChoice("auto", ("read",)).allows("edit") is False


async def test_an_openai_compatible_llama_server_is_asked_what_it_runs(server):
    import asyncio

    from loopback_llm import json_response

    from steerable.providers.openai import ask_server_profile
    from steerable.providers.profiles import DEFAULT_PROFILE, LLAMA_SERVER_QWEN

    server.add(json_response(200, {"data": [{"id": "model"}]}),
               json_response(200, {"model_path": "/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"}),
               json_response(404, {"error": "no"}), json_response(404, {"error": "no"}))
    found = await asyncio.to_thread(ask_server_profile, f"{server.url}/v1")
    assert found is LLAMA_SERVER_QWEN
    assert [r.path for r in server.requests] == ["/v1/models", "/props"]
    assert await asyncio.to_thread(ask_server_profile, f"{server.url}/v1") is DEFAULT_PROFILE


def test_a_text_call_model_is_not_sent_the_words_it_wrote_around_its_calls():
    # The 1.5B copied its own narration of a call ("So, the file does not contain...") as the
    # answer two calls later.
    from steerable._messages import ToolCall
    from steerable.providers.openai import wire_messages

    call = ToolCall(id="c1", name="read", arguments={"path": "a.txt"})
    messages = [Message("user", "what does a.txt say?"),
                Message("assistant", "I will read it. So, it says nothing.", tool_calls=(call,)),
                Message("tool", "hello", tool_call_id="c1", name="read")]
    wire = wire_messages(messages, TEXT_CALLS)
    assert [w["role"] for w in wire] == ["user", "user"]
    assert "it says nothing" not in str(wire)
    native = wire_messages(messages, NATIVE)
    assert native[1]["content"] == "I will read it. So, it says nothing."
