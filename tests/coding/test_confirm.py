"""The second reading of a change: the write gate opens only when the classification and a
differently framed second call agree; any disagreement keeps the files, whatever the model
emits, and tells the user why nothing changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable._messages import Message
from steerable.coding import Workspace, coding_tools
from steerable.coding._classify import CLASSIFY_SYSTEM
from steerable.coding._confirm import (
    CONFIRM_SCHEMA,
    CONFIRM_SYSTEM,
    READ_AS_QUESTION_MARK,
    confirm_request,
    confirms,
)
from steerable.coding.policy import NOTHING_CHANGED_MARK, ToolPolicy
from steerable.errors import ProviderError
from steerable.providers._base import LLMRequest

from .test_policy import _run, change, kind

_ORIGINAL = "def helper(x):\n    return x * 2\n"
_WRITE = Reply(tool_calls=[("write", {"path": "utils.py", "content": "x = 1\n"})])
_EDIT = Reply(tool_calls=[("edit", {"path": "utils.py", "old_text": "x * 2",
                                    "new_text": "x * 3"})])


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "utils.py").write_text(_ORIGINAL)
    return tmp_path


# Questions in several languages that a small model may read as a change (the 0.5B did so
# with "What is 17 + 25?"): the second reading disagrees, so nothing may change.
@pytest.mark.parametrize("question", [
    "What is 17 + 25?", "Was macht die Funktion in utils.py?", "Que fait utils.py ?",
    "¿Qué hace helper en utils.py?", "utils.py?", "waht dose helper retrun",
    "Hello! I'm new here; could you tell me, if it's no trouble, what helper in utils.py "
    "returns? Thank you so much."])
async def test_a_change_the_second_reading_does_not_confirm_changes_nothing(ws, question):
    result, events, _, hook = await _run(
        ws, question, kind("change"), Reply(text=json.dumps({"needs": "reading"})),
        _WRITE, _EDIT, Reply(tool_calls=[("read", {"path": "utils.py"})]),
        Reply(text="helper returns x * 2."))
    assert (ws / "utils.py").read_text() == _ORIGINAL
    purposes = [e.purpose for e in events if e.kind is EventKind.LLM_REQUEST][:2]
    assert purposes == ["classify", "confirm"]
    skipped = [e.tool_name for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert skipped == ["write", "edit"]
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.intent == "workspace"
    assert verdict.held == ("edit", "write") and not verdict.change_missing
    # The user hears that nothing changed, why, and how to ask for the change.
    assert result.text.startswith("helper returns x * 2.")
    assert f"{NOTHING_CHANGED_MARK}: edit, write were refused" in result.text
    assert "ask for it again plainly" in result.text


async def test_an_unconfirmed_change_with_no_attempt_to_change_says_how_it_was_read(ws):
    # A call of a tool the agent does not have changes no file either (the 0.5B called "add").
    result, _, _, hook = await _run(
        ws, "What is 17 + 25?", kind("change"), Reply(text=json.dumps({"needs": "reading"})),
        Reply(tool_calls=[("add", {"a": 17, "b": 25})]),
        Reply(tool_calls=[("read", {"path": "utils.py"})]), Reply(text="42"))
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.held == ()
    # Nothing was refused, but the user hears how the request was read, and how to ask again.
    assert result.text.startswith("42") and NOTHING_CHANGED_MARK not in result.text
    assert f"{READ_AS_QUESTION_MARK}: one reading of the request took it for a change" \
        in result.text and "ask for it again plainly" in result.text


@pytest.mark.parametrize("reply", ["", "writing", '{"needs": "WRITING"}', '{"needs": ["writing"]}',
                                   '{"kind": "change"}', '{"needs": "reading"}', "not json"])
async def test_only_an_exact_confirmation_opens_the_gate(ws, reply):
    await _run(ws, "whatever", kind("change"), Reply(text=reply), _EDIT,
               Reply(tool_calls=[("read", {"path": "utils.py"})]), Reply(text="done"))
    assert (ws / "utils.py").read_text() == _ORIGINAL


async def test_a_failed_second_reading_keeps_the_files(ws):
    def fails(request: Any) -> Reply:
        raise ProviderError("the server went away")
    await _run(ws, "make helper triple", kind("change"), fails, _EDIT,  # type: ignore[arg-type]
               Reply(tool_calls=[("read", {"path": "utils.py"})]), Reply(text="done"))
    assert (ws / "utils.py").read_text() == _ORIGINAL


async def test_a_confirmed_change_changes_and_reports_no_refusal(ws):
    result, _, _, hook = await _run(ws, "make helper triple", *change(), _EDIT,
                                    Reply(text="helper now triples."))
    assert "x * 3" in (ws / "utils.py").read_text()
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.intent == "change" and verdict.held == ()
    assert READ_AS_QUESTION_MARK not in result.text and "refused" not in result.text


async def test_a_question_read_as_one_is_not_read_twice(ws):
    # The second reading costs a call only when the first read a change.
    _, events, *_ = await _run(ws, "what does helper do?", kind("workspace"),
                               Reply(tool_calls=[("read", {"path": "utils.py"})]),
                               Reply(text="helper returns x * 2."))
    assert [e.purpose for e in events if e.kind is EventKind.LLM_REQUEST].count("confirm") == 0


_words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80)


@given(first=_words, answer=_words, now=_words)
def test_every_second_reading_starts_with_the_same_prefix_and_ends_with_the_request(
        first: str, answer: str, now: str) -> None:
    request = LLMRequest(messages=(Message("system", "agent"), Message("user", first),
                                   Message("assistant", answer), Message("user", now)),
                         params={"temperature": 0.7})
    asked = confirm_request(request)
    assert asked.messages[0] == Message("system", CONFIRM_SYSTEM)  # the cached prefix
    assert [m.role for m in asked.messages[1:]] == ["user", "assistant", "user"]
    assert asked.messages[-1].content == now and asked.tools == ()
    assert asked.answer_schema == CONFIRM_SCHEMA and asked.params["temperature"] == 0
    assert asked.tool_choice.mode == "none" and asked.tool_choice.max_tokens


@given(st.text(max_size=40))
def test_only_a_well_formed_writing_confirms(reply: str) -> None:
    if confirms(reply):
        assert json.loads(reply)["needs"] == "writing"


def test_the_examples_are_neither_the_suites_nor_the_classifications() -> None:
    suite = Path(__file__).resolve().parents[2] / "bench" / "tasks"
    prompts = (suite / "tasks.py").read_text() + (suite / "tasks_new.py").read_text()
    examples = [json.loads(line.split(" -> ")[0]) for line in CONFIRM_SYSTEM.splitlines()
                if " -> " in line]
    first = [json.loads(line.split(" -> ")[0]) for line in CLASSIFY_SYSTEM.splitlines()
             if " -> " in line]
    assert len(examples) >= 10
    assert not [e for e in examples if e in prompts or e in first]


async def test_steering_that_confirms_the_change_clears_what_was_refused_before(ws):
    # Read as a question (the readings disagreed), the model tried a write (refused); the user
    # then steers, the request is read again, both readings agree: the change is made, and the
    # earlier refusal no longer stands in the verdict (no exit 6 for a change that was made).
    provider = ScriptedProvider([
        kind("change"), Reply(text=json.dumps({"needs": "reading"})), _WRITE,
        Reply(tool_calls=[("read", {"path": "utils.py"})]),
        *change(), _EDIT, Reply(text="helper now triples.")])
    workspace = Workspace(ws)
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(workspace)))
    policy = ToolPolicy(workspace)
    loop.register_hook(policy, timeout=60)

    def steer(ctx: Any) -> None:
        if ctx.call.name == "read":
            loop.inject_steering("yes, change it: make it triple", "s")

    loop.register_hook(type("Steer", (), {"before_tool": staticmethod(steer)})())
    result = await loop.run_turn("helper triple?", session_id="s")
    await loop.aclose()
    provider.assert_consumed()
    assert "x * 3" in (ws / "utils.py").read_text()
    verdict = policy.verdict(result.turn_id)
    assert verdict is not None and verdict.intent == "change" and verdict.held == ()
    assert "refused" not in result.text and READ_AS_QUESTION_MARK not in result.text
