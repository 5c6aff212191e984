"""The JSON form of hook contexts and decisions that crosses to a hook activity and back:
what a hook on a worker sees is what the workflow's engine had, and its decision comes back
whole (property-tested over the decisions' fields)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import HookAction, HookDecision, Message
from steerable._hooks import ToolCallContext, ToolResultContext
from steerable._messages import ToolCall, ToolResult
from steerable.errors import ConfigurationError
from steerable.providers._base import ToolChoice
from steerable.temporal._hooks import (
    context_from_json,
    context_to_json,
    decision_from_json,
    decision_to_json,
)

text = st.text(max_size=20)
json_value = st.recursive(st.none() | st.booleans() | st.integers() | text,
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(text, inner, max_size=3), max_leaves=8)
arguments = st.dictionaries(text, json_value, max_size=4)


@st.composite
def decisions(draw: Any) -> HookDecision:
    action = draw(st.sampled_from(list(HookAction)))
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["messages"] = [Message(draw(st.sampled_from(["user", "assistant"])), draw(text))
                              for _ in range(draw(st.integers(0, 3)))]
    if draw(st.booleans()):
        fields["tool_choice"] = ToolChoice(
            draw(st.sampled_from(["auto", "none", "required"])),
            draw(st.none() | st.tuples(text)), draw(st.none() | st.integers(1, 9)), draw(text),
            tuple(draw(st.lists(st.tuples(text, st.lists(
                st.tuples(text, st.lists(text, max_size=3).map(tuple)), max_size=2).map(tuple)),
                max_size=2))))
    for name, strategy in (("model", text), ("text", text), ("result", text),
                           ("is_error", st.booleans()), ("reason", text),
                           ("arguments", arguments), ("params", arguments)):
        if draw(st.booleans()):
            fields[name] = draw(strategy)
    if draw(st.booleans()):
        fields["tool_calls"] = draw(st.lists(st.tuples(text, arguments), max_size=3))
    return HookDecision(action, **fields)


def _same(a: HookDecision, b: HookDecision) -> None:
    assert a.action is b.action and a.fields_set() == b.fields_set()
    for name in a.fields_set():
        x, y = getattr(a, name), getattr(b, name)
        if name == "tool_calls":
            x, y = [(n, dict(v)) for n, v in x], [(n, dict(v)) for n, v in y]
        elif name in ("arguments", "params"):
            x, y = dict(x), dict(y)
        elif name == "messages":
            x, y = [(m.role, m.content) for m in x], [(m.role, m.content) for m in y]
        assert x == y, name


@given(decisions())
def test_a_decision_comes_back_whole(decision: HookDecision) -> None:
    _same(decision_from_json(decision_to_json(decision)), decision)


def test_a_choice_recorded_before_it_had_values_reads_back() -> None:
    old = {"action": "modify", "tool_choice": {"mode": "required", "only": ["read"],
                                               "max_tokens": 9, "reason": "r"}}
    assert decision_from_json(old).tool_choice == ToolChoice("required", ("read",), 9, "r")


@given(st.none() | st.booleans())
def test_none_and_approve_answers_pass_as_they_are(value: bool | None) -> None:
    assert decision_from_json(decision_to_json(value)) is value


def test_a_hook_in_an_activity_cannot_change_the_tools() -> None:
    with pytest.raises(ConfigurationError, match="in_workflow"):
        decision_to_json(HookDecision(HookAction.MODIFY, tools=[]))


@given(arguments, text, st.booleans(), st.booleans(), st.booleans())
def test_tool_contexts_reach_the_worker_as_they_were(args: dict[str, Any], content: str,
                                                     is_error: bool, read_only: bool,
                                                     dry_run: bool) -> None:
    ids = {"turn_id": "t", "session_id": "s", "parent_turn_id": None, "iteration": 2}
    call = ToolCall("c1", "write", args)
    before = ToolCallContext(**ids, call=call, read_only=False, dry_run=True)
    got = context_from_json("before_tool", context_to_json("before_tool", before), _no_ask)
    assert (got.call.id, got.call.name, dict(got.call.arguments), got.read_only,
            got.dry_run, got.iteration) == ("c1", "write", args, False, True, 2)
    after = ToolResultContext(**ids, call=call, result=ToolResult(content, is_error=is_error),
                              read_only=read_only, dry_run=dry_run)
    got = context_from_json("after_tool", context_to_json("after_tool", after), _no_ask)
    assert (got.result.content, got.result.is_error, got.read_only, got.dry_run) == (
        content, is_error, read_only, dry_run)


def test_an_after_tool_context_recorded_before_read_only_existed_may_have_changed_files(
) -> None:
    raw = {"turn_id": "t", "session_id": "s", "parent_turn_id": None, "iteration": 1,
           "call": {"id": "c", "name": "bash", "arguments": {}},
           "result": context_to_json("after_tool", ToolResultContext(
               turn_id="t", session_id="s", parent_turn_id=None, iteration=1,
               call=ToolCall("c", "bash", {}), result=ToolResult("ok")))["result"]}
    got = context_from_json("after_tool", raw, _no_ask)
    assert (got.read_only, got.dry_run) == (False, False)


async def _no_ask(*args: Any) -> Any:
    raise AssertionError("not asked")
