"""Which tools a small local model is offered per call (``route_tools`` profiles)."""

from __future__ import annotations

import pytest
from loopback_llm import openai_frames, stream

from conftest import run_turn
from steerable import Message, ToolCall, TurnStatus, tool
from steerable.providers._base import ToolSpec
from steerable.providers._routing import tool_offer
from steerable.providers.openai import OpenAIProvider
from steerable.providers.profiles import ModelProfile

ROUTED = ModelProfile(name="routed", text_tool_calls=True, tool_results_as_user=True,
                      calls_in_history=False, route_tools=True, max_tool_rounds=3)


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


@pytest.mark.parametrize("prompt, offer", [
    ("What does notes.txt say?", "required"),
    ("Which version is set in package.json?", "required"),
    ("List the files in this folder.", "required"),
    ("Run the tests and tell me how many passed.", "required"),
    ("Fix the bug in calc.py.", "required"),
    ("What is 17 + 25?", "none"),
    ("In one sentence: what does Python's len() return?", "none"),
    ("Email the file README.md to bob@example.com.", "none"),
    ("Look up the weather online.", "none"),
])
def test_the_first_call_of_a_request(prompt, offer):
    assert tool_offer([Message("system", "rules"), Message("user", prompt)], SPECS, 3) == offer


SPECS = (ToolSpec("read", "Read.", {}, read_only=True), ToolSpec("edit", "Edit.", {}))


def _call(name: str, **args: str) -> Message:
    return Message("assistant", "", tool_calls=(ToolCall(f"c-{name}", name, args),))


def _result(name: str, text: str, error: bool = False) -> Message:
    return Message("tool", text, tool_call_id=f"c-{name}", name=name, is_error=error)


def test_a_question_is_answered_from_the_first_results():
    turn = [Message("user", "what does calc.py say?"), _call("read", path="calc.py"),
            _result("read", "x")]
    assert tool_offer(turn, SPECS, 3) == "none"


def test_a_change_must_act_then_answers():
    start = [Message("user", "fix calc.py"), _call("read", path="calc.py"), _result("read", "x")]
    assert tool_offer(start, SPECS, 4) == "act"
    done = [*start, _call("edit", path="calc.py", old="b"), _result("edit", "ok")]
    assert tool_offer(done, SPECS, 4) == "none"  # one change made: no second guess at it


def test_a_change_in_every_file_may_go_on_until_a_repeat_or_the_round_limit():
    start = [Message("user", "rename f to g in every file"), _call("read", path="calc.py"),
             _result("read", "x")]
    assert tool_offer(start, SPECS, 4) == "act"  # read: now a call that changes something
    failed = [*start, _call("edit", path="calc.py", old="a"), _result("edit", "no", True)]
    assert tool_offer(failed, SPECS, 4) == "act"  # the edit failed: still required
    done = [*start, _call("edit", path="calc.py", old="b"), _result("edit", "ok")]
    assert tool_offer(done, SPECS, 4) == "auto"  # changed: more calls allowed, or an answer
    again = [*done, _call("edit", path="calc.py", old="b"), _result("edit", "ok")]
    assert tool_offer(again, SPECS, 4) == "none"  # the same call twice: answer now
    assert tool_offer(done, SPECS, 2) == "none"  # the round limit: answer now
    # a new user message (the next turn, or steering) starts over
    assert tool_offer([*done, Message("assistant", "done"), Message("user", "what is 2+2?")],
                      SPECS, 4) == "none"


async def test_the_provider_requires_a_call_first_then_offers_tools_then_answers(server, retry):
    server.add(stream(openai_frames(['{"name": "read", "arguments": {"path": "a.txt"}}'])),
               stream(openai_frames(['{"name": "edit", "arguments": {"path": "a.txt"}}'])),
               stream(openai_frames(['{"name": "edit", "arguments": {"path": "a.txt"}}'])),
               stream(openai_frames(["Fixed."])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=ROUTED, retry=retry, environ={})
    result, _ = await run_turn(p, "fix a.txt in every folder", tools=[read, edit])
    assert result.status is TurnStatus.COMPLETED and result.text == "Fixed."
    first, second, third, fourth = (r.body for r in server.requests)
    # a call is required: the reply may only be one call of an offered tool, fitting its schema
    calls = first["response_format"]["json_schema"]["schema"]["oneOf"]
    assert [c["properties"]["name"] for c in calls] == [{"const": "read"}, {"const": "edit"}]
    assert calls[0]["properties"]["arguments"]["required"] == ["path"]
    assert "tools" in first
    # it read: now only a call that changes something will do
    acting = second["response_format"]["json_schema"]["schema"]["oneOf"]
    assert [c["properties"]["name"] for c in acting] == [{"const": "edit"}]
    assert [t["function"]["name"] for t in second["tools"]] == ["read", "edit"]
    assert second["messages"][-1]["content"].endswith(
        "My request was: fix a.txt in every folder\nGo on with it.")
    assert "tool_choice" not in third and "response_format" not in third  # edited: optional
    assert fourth["tool_choice"] == "none"  # it repeated its call: it must answer now
    assert fourth["grammar"] == "root ::= [^{`<]*"  # in plain words, not a call as text


async def test_a_general_question_may_call_no_tool(server, retry):
    call = '{"name": "read", "arguments": {"path": "a.txt"}}'
    server.add(stream(openai_frames([call])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=ROUTED, retry=retry, environ={})
    result, _ = await run_turn(p, "What is 17 + 25?", tools=[read])
    assert result.text == call  # no call allowed: a call written as text stays text
    body = server.requests[0].body
    # the tools are still listed (the same prompt prefix every call, so the server's cache
    # keeps it), but none may be called
    assert body["tool_choice"] == "none" and [t["function"]["name"] for t in body["tools"]] == [
        "read"]
    assert "response_format" not in body and body["grammar"] == "root ::= [^{`<]*"
    assert body["messages"][-1]["content"] == (
        "What is 17 + 25?\n\n(Note: this needs no tool; answer it directly.)")


async def test_a_request_no_tool_can_serve_carries_a_note_saying_so(server, retry):
    server.add(stream(openai_frames(["I cannot send email."])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=ROUTED, retry=retry, environ={})
    await run_turn(p, "Email a.txt to bob@example.com", tools=[read])
    body = server.requests[0].body
    assert body["tool_choice"] == "none"
    assert body["messages"][-1]["content"].startswith("Email a.txt to bob@example.com\n\n(Note: "
                                                      "none of your tools can send email")


async def test_a_question_is_answered_from_results_that_restate_it(server, retry):
    server.add(stream(openai_frames(['{"name": "read", "arguments": {"path": "a.txt"}}'])),
               stream(openai_frames(["It says: contents of a.txt"])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=ROUTED, retry=retry, environ={})
    result, _ = await run_turn(p, "what does a.txt say?", tools=[read])
    assert result.text == "It says: contents of a.txt"
    answer = server.requests[1].body
    assert answer["tool_choice"] == "none"
    assert answer["messages"][-1] == {"role": "user", "content": (
        'Result of read({"path": "a.txt"}):\ncontents of a.txt\n\n'
        "My request was: what does a.txt say?\nAnswer it now in plain words, using these "
        "results.")}


async def test_without_text_calls_a_required_call_is_asked_with_tool_choice(server, retry):
    server.add(stream(openai_frames(["ok"])))
    profile = ModelProfile(name="native", route_tools=True)
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=profile, retry=retry, environ={})
    await run_turn(p, "what does a.txt say?", tools=[read])
    body = server.requests[0].body
    assert body["tool_choice"] == "required" and "response_format" not in body
