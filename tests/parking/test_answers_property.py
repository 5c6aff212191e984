"""The answer check as a property: any JSON value, any choices or schema; and the request ids."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steerable._core._requests import check_answer, new_request_id
from steerable.errors import InvalidAnswerError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)


def accepts(value: Any, choices: Any = None, schema: Any = None) -> bool:
    try:
        check_answer(value, choices, schema)
    except InvalidAnswerError:
        return False
    return True


@given(value=JSON, choices=st.lists(st.text(), min_size=1, max_size=5))
def test_with_choices_exactly_the_choices_are_accepted(value: Any, choices: list[str]) -> None:
    assert accepts(value, choices) == (value in choices)
    assert all(accepts(c, choices) for c in choices)


@given(value=JSON, minimum=st.integers(-5, 5))
def test_with_a_schema_exactly_what_fits_is_accepted(value: Any, minimum: int) -> None:
    # JSON Schema's integer: a number with no fraction (2.0 is one), never a bool.
    number = isinstance(value, int | float) and not isinstance(value, bool)
    fits = number and (isinstance(value, int) or value.is_integer()) and value >= minimum
    assert accepts(value, schema={"type": "integer", "minimum": minimum}) == fits


@given(value=JSON)
def test_with_neither_only_text_is_accepted(value: Any) -> None:
    assert accepts(value) == isinstance(value, str)


def test_an_answer_wrong_in_several_places_is_told_the_first_by_its_path() -> None:
    schema = {"type": "object", "properties": {"size": {"type": "integer"},
                                               "tags": {"type": "array",
                                                        "items": {"type": "string"}}}}
    try:
        check_answer({"tags": ["a", 2], "size": "big"}, None, schema)
    except InvalidAnswerError as exc:
        assert str(exc) == ("the answer does not fit the question's schema at size: 'big' is "
                            "not of type 'integer'")
    else:
        raise AssertionError("an answer wrong in two places was accepted")


def test_what_is_not_json_is_refused_with_a_reason() -> None:
    try:
        check_answer({1, 2}, None, {"type": "array"})
    except InvalidAnswerError as exc:
        assert "JSON" in str(exc)
    else:
        raise AssertionError("a set was accepted")
    json.dumps(check_answer([1, 2], None, {"type": "array"}))


@given(st.sampled_from(["approval", "question"]))
def test_request_ids_carry_128_random_bits(kind: str) -> None:
    rid = new_request_id(kind)  # type: ignore[arg-type]
    token = rid.removeprefix(f"{kind}_")
    assert len(token) == 32 and set(token) <= set("0123456789abcdef")  # 16 random bytes
