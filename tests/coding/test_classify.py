"""The policy's classification call: a fixed, cacheable prefix with the request last; any
reply maps to a kind, anything malformed to the safe one; a plan is not a look."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable._messages import Message, ToolCall
from steerable.coding import Workspace, coding_tools
from steerable.coding._classify import CLASSIFY_SCHEMA, CLASSIFY_SYSTEM, KINDS, parse_kind
from steerable.coding._todo import make_todo_tool
from steerable.coding.policy import ToolPolicy, classify_request
from steerable.providers._base import LLMRequest, ToolSpec

_TOOLS = (ToolSpec("read", "Read a file.", {"type": "object"}, True),)
_words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80)


@given(system=_words, first=_words, answer=_words, now=_words)
def test_every_classification_starts_with_the_same_prefix_and_ends_with_the_request(
        system: str, first: str, answer: str, now: str) -> None:
    request = LLMRequest(messages=(Message("system", system), Message("user", first),
                                   Message("assistant", answer), Message("user", now)),
                         tools=_TOOLS, params={"temperature": 0.7})
    asked = classify_request(request)
    # the fixed instructions and examples first (what the server's prompt cache keeps) ...
    assert asked.messages[0] == Message("system", CLASSIFY_SYSTEM)
    # ... the agent's own instructions and tool list are not part of it ...
    assert asked.tools == () and all(m.role != "system" for m in asked.messages[1:])
    # ... the previous exchange (shortened) for a follow-up, then this request, last
    assert [m.role for m in asked.messages[1:]] == ["user", "assistant", "user"]
    assert asked.messages[1].content == first[:400]
    assert asked.messages[-1].content == now
    assert asked.answer_schema == CLASSIFY_SCHEMA and asked.params["temperature"] == 0
    assert asked.tool_choice.mode == "none" and asked.tool_choice.max_tokens


def test_steering_is_added_to_the_request_it_classifies() -> None:
    request = LLMRequest(messages=(Message("user", "what does f do?"),
                                   Message("assistant", "", tool_calls=(ToolCall("c", "read", {
                                       "path": "a.py"}),)),
                                   Message("tool", "def f(): ...", tool_call_id="c", name="read"),
                                   Message("user", "and rename it to g")))
    asked = classify_request(request)
    assert [m.content for m in asked.messages[1:]] == ["what does f do?\nand rename it to g"]


@given(st.text(max_size=60))
def test_any_reply_reads_as_a_kind_and_only_a_well_formed_one_as_more_than_a_look(
        reply: str) -> None:
    kind = parse_kind(reply)
    assert kind in KINDS
    if kind != "workspace":
        assert json.loads(reply)["kind"] == kind


def test_the_examples_are_not_tuned_to_the_task_suite() -> None:
    suite = Path(__file__).resolve().parents[2] / "bench" / "tasks"
    prompts = (suite / "tasks.py").read_text() + (suite / "tasks_new.py").read_text()
    examples = [line.split(" -> ")[0] for line in CLASSIFY_SYSTEM.splitlines() if " -> " in line]
    assert len(examples) >= 40
    assert not [e for e in examples if json.loads(e) in prompts]


async def test_a_plan_is_not_the_required_look(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("sync at 10\n")
    provider = ScriptedProvider([
        Reply(text='{"kind": "workspace"}'),
        Reply(tool_calls=[("todo", {"items": [{"content": "read notes", "status": "pending"}]})]),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="The sync is at 10.")])
    workspace = Workspace(tmp_path)
    loop = AgentLoop(Agent(provider=provider, tools=[*coding_tools(workspace),
                                                      make_todo_tool()]))
    loop.register_hook(ToolPolicy(workspace), timeout=60)
    sub = loop.subscribe()
    await loop.run_turn("when is the sync?", session_id="s")
    await loop.aclose()
    events = sub.drain_nowait()
    calls = [e for e in events if e.kind is EventKind.LLM_REQUEST and not e.purpose]
    assert calls[0].tool_choice == "required" and "todo" not in calls[0].may_call
    skipped = [e.tool_name for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert skipped == ["todo"]  # a plan where a look was required is refused ...
    assert calls[1].tool_choice == "required"  # ... and the look is still owed
    assert calls[2].tool_choice == "auto" and "todo" in calls[2].may_call  # then plans are fine
