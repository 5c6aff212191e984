"""Tool calls written as text: parsing, streaming hold-back, and the profile end to end."""

from __future__ import annotations

import pytest
from loopback_llm import openai_frames, stream

from conftest import kinds, run_turn
from steerable import EventKind, TurnStatus, tool
from steerable.providers._textcalls import TextCall, TextCallBuffer, distinct, find_text_calls
from steerable.providers.openai import OpenAIProvider
from steerable.providers.profiles import (
    DEFAULT_PROFILE,
    QWEN25_CODER_SMALL,
    ModelProfile,
    profile_for,
)

CALL = '{"name": "read_file", "arguments": {"path": "a.txt"}}'


@pytest.mark.parametrize("text", [
    f"```json\n{CALL}\n```",
    f"```\n{CALL}\n```",
    CALL,
    f"<tool_call>\n{CALL}\n</tool_call>",
    f"<tool_call>\n{CALL}",  # the model stopped before the closing tag
    '{"name": "read_file", "parameters": {"path": "a.txt"}}',
    '{"name": "read_file", "arguments": "{\\"path\\": \\"a.txt\\"}"}',
    '{"type": "function", "function": {"name": "read_file", "arguments": {"path": "a.txt"}}}',
])
def test_one_call_in_each_shape(text):
    rest, calls = find_text_calls(text)
    assert calls == [TextCall("read_file", {"path": "a.txt"})]
    assert rest == ""


def test_prose_around_calls_is_kept_and_several_calls_keep_their_order():
    text = ('I will read both.\n<tool_call>\n{"name": "r", "arguments": {"p": 1}}\n</tool_call>\n'
            '<tool_call>\n{"name": "r", "arguments": {"p": 2}}\n</tool_call>')
    rest, calls = find_text_calls(text)
    assert [c.arguments for c in calls] == [{"p": 1}, {"p": 2}]
    assert rest == "I will read both."


@pytest.mark.parametrize("text", [f"[{CALL}, {CALL}]", f"[\n  {CALL},\n  {CALL}\n]"])
def test_a_json_list_of_calls_leaves_no_brackets_behind(text):
    # A schema-held reply is pretty-printed ("[\n  {"): brackets left as the answer's text
    # went back into the history, and the 1.5B then answered "[ ]".
    rest, calls = find_text_calls(text)
    assert len(calls) == 2 and rest == ""


def test_a_list_that_repeats_calls_keeps_each_call_once_in_order():
    a, b = TextCall("read", {"path": "a"}), TextCall("read", {"path": "b"})
    assert distinct([a, b, a, b, TextCall("read", {"path": "a"}), a]) == [a, b]
    assert distinct([TextCall("f", {"x": 1, "y": 2}), TextCall("f", {"y": 2, "x": 1})]) == \
        [TextCall("f", {"x": 1, "y": 2})]


@pytest.mark.parametrize("text", [
    'Use {"a": 1} as config.',
    "```python\nprint({'name': 1})\n```",
    '```json\n{"name": "Ada", "age": 3}\n```',
    "no braces at all",
])
def test_text_that_is_not_a_call_is_left_alone(text):
    assert find_text_calls(text) == (text, [])


def test_broken_tagged_call_is_a_failed_call_not_text():
    rest, calls = find_text_calls('<tool_call>\n{"name": "read_file", "arguments": {"path": }\n'
                                  "</tool_call>")
    (call,) = calls
    assert call.name == "read_file" and call.arguments == {}
    assert call.error is not None and "not valid JSON" in call.error
    assert rest == ""


def test_broken_fenced_call_is_a_failed_call():
    _, calls = find_text_calls('```json\n{"name": "read_file", "arguments": {"path": "a}\n```')
    assert len(calls) == 1 and calls[0].error is not None


def test_arguments_that_are_not_an_object():
    _, calls = find_text_calls('{"name": "f", "arguments": [1, 2]}')
    assert calls[0].error == "arguments must be a JSON object, got list"


def test_buffer_streams_prose_and_holds_back_from_a_marker_split_across_deltas():
    buffer = TextCallBuffer()
    shown = [buffer.feed(d) for d in ["Let me look", " at it.\n`", "``json\n", CALL, "\n```"]]
    assert shown == ["Let me look", " at it.\n", "", "", ""]
    rest, calls = buffer.finish()
    assert rest == "" and [c.name for c in calls] == ["read_file"]


def test_buffer_releases_what_turns_out_not_to_be_a_call():
    buffer = TextCallBuffer()
    assert buffer.feed("Answer: <") == "Answer: "
    assert buffer.feed("b>bold</b>") == "<b>bold</b>"
    assert buffer.feed(" and {") == " and "
    assert buffer.feed("x} then [") == "{x} then "
    assert buffer.feed("1, 2] and {\"na") == "[1, 2] and "
    assert buffer.feed("me_of\": 1}") == '{"name_of": 1}'
    assert buffer.finish() == ("", [])


def test_code_blocks_in_other_languages_stream():
    buffer = TextCallBuffer()
    shown = [buffer.feed(d) for d in ["Here:\n``", "`pyth", "on\ndef f(x):\n", "    return {}\n",
                                      "```\n", "Done."]]
    assert "".join(shown) == "Here:\n```python\ndef f(x):\n    return {}\n```\nDone."
    assert shown[2] == "```python\ndef f(x):\n"
    assert buffer.finish() == ("", [])


def test_a_json_fence_that_holds_data_is_given_back_at_the_end():
    buffer = TextCallBuffer()
    shown = buffer.feed('```json\n{"a": 1}\n```')
    assert shown == ""
    assert buffer.finish() == ('```json\n{"a": 1}\n```', [])


def test_profiles_by_model_name():
    assert profile_for("qwen2.5-coder-0.5b-instruct-q4_k_m") is QWEN25_CODER_SMALL
    assert profile_for("Qwen2.5-Coder-1.5B-Instruct") is QWEN25_CODER_SMALL
    assert profile_for("gpt-4o") is DEFAULT_PROFILE
    assert profile_for(None) is DEFAULT_PROFILE


seen: list[str] = []


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a file."""
    seen.append(path)
    return "the file says 42"


@pytest.mark.parametrize("deltas", [
    ["Sure.\n```json\n", '{"name": "read_file", ', '"arguments": {"path": "a.txt"}}', "\n```"],
    ['{"name": "read_file", "arguments": ', '{"path": "a.txt"}}'],
    ["<tool_call>\n", '{"name": "read_file", "arguments": {"path": "a.txt"}}', "\n</tool_call>"],
], ids=["fenced", "bare", "tagged"])
async def test_text_tool_calls_run_through_the_loop_with_the_qwen_profile(server, retry, deltas):
    seen.clear()
    server.add(stream(openai_frames(deltas)), stream(openai_frames(["It says 42."])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", model="qwen2.5-coder-0.5b-instruct",
                       retry=retry, environ={})
    result, events = await run_turn(p, "what does a.txt say?", tools=[read_file],
                                    params={"temperature": 0.7})

    assert result.status is TurnStatus.COMPLETED and result.text == "It says 42."
    assert seen == ["a.txt"]
    first, second = (r.body for r in server.requests)
    assert first["temperature"] == 0.0 and "tools" in first
    # No call text leaks into the answer's deltas; the call being written shows as progress
    # (thinking deltas), so a long call is not minutes of nothing.
    first_deltas = [e.text for e in kinds(events, EventKind.LLM_DELTA)
                    if e.iteration == 1 and not e.thinking]
    assert all("read_file" not in d for d in first_deltas)
    progress = "".join(e.text for e in kinds(events, EventKind.LLM_DELTA) if e.thinking)
    assert "read_file" in progress
    # The result goes back as a user message naming the call; no tools, no echo of the call.
    assert "tools" not in second
    assert second["messages"][-1] == {
        "role": "user", "content": 'Result of read_file({"path": "a.txt"}):\nthe file says 42'}
    # Nor the words the model wrote around its call ("Sure."): the call is not in the history.
    assert [m["role"] for m in second["messages"]] == ["user", "user"]


async def test_results_as_user_messages_merge_and_keep_calls_as_text(server, retry):
    server.add(stream(openai_frames(['[{"name": "read_file", "arguments": {"path": "a"}}, '
                                     '{"name": "read_file", "arguments": {"path": "b"}}]'])),
               stream(openai_frames(["both 42"])))
    profile = ModelProfile(name="t", text_tool_calls=True, tool_results_as_user=True)
    p = OpenAIProvider(base_url=f"{server.url}/v1", profile=profile, retry=retry, environ={})
    result, _ = await run_turn(p, "read a and b", tools=[read_file])

    assert result.text == "both 42"
    messages = server.requests[1].body["messages"]
    assert messages[1]["role"] == "assistant" and messages[1]["content"].count("```json") == 2
    assert messages[2] == {"role": "user", "content":
                           'Result of read_file({"path": "a"}):\nthe file says 42\n\n'
                           'Result of read_file({"path": "b"}):\nthe file says 42'}
    assert "tools" in server.requests[1].body


async def test_without_the_profile_text_stays_text(server, retry):
    server.add(stream(openai_frames([CALL])))
    p = OpenAIProvider(base_url=f"{server.url}/v1", model="gpt-test", retry=retry, environ={})
    result, events = await run_turn(p, tools=[read_file])
    assert result.text == CALL and not kinds(events, EventKind.TOOL_EXEC_START)
