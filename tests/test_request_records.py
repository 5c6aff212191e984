"""A parked request survives its record: whatever a checkpoint or a store's index writes of a
request (its question, choices, schema, arguments, answer and reason) reads back the same,
through JSON, for every request a turn can make."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable._core._requests import PendingRequest, request_from_record, request_to_record

TEXT = st.text(max_size=12)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | TEXT,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
COMMON: dict[str, Any] = {
    "request_id": TEXT, "session_id": TEXT, "turn_id": TEXT, "call_id": TEXT, "tool_name": TEXT,
    "created": st.floats(0, 2e9, allow_nan=False)}


def _answer(draw: st.DrawFn, value: st.SearchStrategy[Any]) -> dict[str, Any]:
    if not draw(st.booleans()):
        return {}
    return {"answered": True, "value": draw(value), "reason": draw(TEXT)}


@st.composite
def requests(draw: st.DrawFn) -> PendingRequest:
    common = {name: draw(strategy) for name, strategy in COMMON.items()}
    if draw(st.booleans()):
        return PendingRequest(
            kind="approval", **common,
            arguments=draw(st.none() | st.dictionaries(TEXT, JSON, max_size=3)),
            **_answer(draw, st.booleans()))
    return PendingRequest(
        kind="question", **common, question=draw(TEXT), index=draw(st.integers(0, 5)),
        choices=draw(st.none() | st.lists(TEXT, max_size=3).map(tuple)),
        schema=draw(st.none() | st.dictionaries(TEXT, JSON, max_size=3)),
        **_answer(draw, JSON))


@settings(max_examples=300, deadline=None)
@given(requests())
def test_a_request_reads_back_from_its_record_as_it_was(req: PendingRequest) -> None:
    again = request_from_record(json.loads(json.dumps(request_to_record(req))))
    assert again == req
