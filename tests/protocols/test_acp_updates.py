"""Property: whatever calls the model makes and however they end, every update the agent
builds is a valid ACP ``session/update`` that the package's models take unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("acp")

from acp import schema

from steerable import ToolCall
from steerable._events import LLMResponseEvent, ToolExecEnd, ToolExecSkipped
from steerable.protocols.acp._updates import ToolView, translate
from tests.protocols._acp_client import _strict

NAMES = st.sampled_from(["read", "write", "edit", "bash", "grep", "find", "ls", "mcp_tool",
                         "subagent"])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
ARGS = st.dictionaries(st.sampled_from(["path", "content", "old_text", "new_text", "command",
                                        "pattern", "offset", "x"]), JSON, max_size=5)
BASE = {"turn_id": "t", "parent_turn_id": None, "session_id": "s", "time": 0.0}


def check(update: Any) -> None:
    raw = json.loads(schema.SessionNotification(session_id="s", update=update).model_dump_json(
        by_alias=True, exclude_unset=True))
    _strict(schema.SessionNotification, raw, update.session_update)


@settings(max_examples=150, deadline=None)
@given(calls=st.lists(st.tuples(NAMES, ARGS), min_size=1, max_size=4),
       ends=st.lists(st.tuples(st.booleans(), st.text(max_size=40)), min_size=4, max_size=4),
       window=st.none() | st.integers(1, 10**6))
def test_every_update_is_valid_acp(tmp_path_factory: Any, calls: list[Any], ends: list[Any],
                                   window: int | None) -> None:
    root = Path(tmp_path_factory.getbasetemp())
    view = ToolView(root, {})
    tool_calls = tuple(ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls))
    arguments = {c.id: dict(c.arguments) for c in tool_calls}
    events: list[Any] = [LLMResponseEvent(**BASE, seq=1, iteration=1, text="",
                                          tool_calls=tool_calls)]
    for (call, (failed, text)) in zip(tool_calls, ends, strict=False):
        if failed:
            events.append(ToolExecSkipped(**BASE, seq=2, call_id=call.id, tool_name=call.name,
                                          reason="denied", detail=text))
        else:
            events.append(ToolExecEnd(**BASE, seq=2, call_id=call.id, tool_name=call.name,
                                      is_error=False, content=text))
    for event in events:
        for update in translate(event, view, arguments, window):
            check(update)


def test_a_subturns_calls_show_only_when_the_editor_was_asked_about_them(
        tmp_path: Path) -> None:
    child = {**BASE, "parent_turn_id": "parent"}
    end = ToolExecEnd(**child, seq=3, call_id="k1", tool_name="write", is_error=False,
                      content="written")
    view = ToolView(tmp_path, {})
    assert translate(end, view, {}, None) == []  # the sub-agent's own business
    [update] = translate(end, view, {}, None, announced={"k1"})  # asked, so it ends there too
    assert (update.tool_call_id, update.status) == ("k1", "completed")
