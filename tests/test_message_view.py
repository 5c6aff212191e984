"""Requests hold O(1) views of the history: they must read like the tuple they replace and never
change afterwards, whatever the turn does next (more messages, compression)."""

from __future__ import annotations

import pytest

from steerable import Agent, AgentLoop, Message, Reply, ScriptedProvider, tool
from steerable._history import MessageView
from steerable.errors import ContextOverflowError


def _msgs(*texts: str) -> list[Message]:
    return [Message("user", t) for t in texts]


def test_view_reads_like_the_tuple_of_its_parts() -> None:
    head, base, new = (Message("system", "s"),), _msgs("a", "b"), _msgs("c")
    view = MessageView(head, base, new, ())
    expected = (*head, *base, *new)
    assert view == expected and expected == view and hash(view) == hash(expected)
    assert len(view) == 4 and list(view) == list(expected)
    assert view[0] is head[0] and view[-1] is new[0] and view[2] is base[1]
    assert view[1:3] == expected[1:3] and list(reversed(view)) == list(reversed(expected))
    assert view + (Message("user", "d"),) == (*expected, Message("user", "d"))  # noqa: RUF005
    assert view != expected[:3] and view != list(expected)
    with pytest.raises(IndexError):
        view[4]
    with pytest.raises(IndexError):
        view[-5]
    assert repr(view).startswith("MessageView((Message(")


def test_view_does_not_see_later_appends() -> None:
    base, new = _msgs("a"), _msgs("b")
    view = MessageView(base, new)
    new.append(Message("user", "later"))
    base.append(Message("user", "later too"))
    assert [m.content for m in view] == ["a", "b"] and len(view) == 2
    assert [m.content for m in reversed(view)] == ["b", "a"] and view[-1].content == "b"


@tool(read_only=True)
def look(path: str) -> str:
    """Look."""
    return "x" * 50


async def test_recorded_requests_keep_their_messages_through_later_calls_and_compression() -> None:
    script = []
    for i in range(3):
        script += [Reply(tool_calls=[("look", {"path": str(i)})]), Reply(text=f"answer {i}")]
    provider = ScriptedProvider([*script, Reply(tool_calls=[("look", {"path": "z"})]),
                                 Reply(error=ContextOverflowError("too long")), Reply(text="fits")])
    loop = AgentLoop(Agent(provider=provider, tools=[look], instructions="sys"))
    for i in range(3):
        await loop.run_turn(f"question {i}", session_id="s")
    result = await loop.run_turn("question 3", session_id="s")
    assert result.text == "fits"
    first_of_turn = provider.requests[6].messages  # before the tool call of the last turn
    assert [m.content for m in first_of_turn][-1] == "question 3"
    assert len(first_of_turn) == 1 + 12 + 1  # system, three turns of four messages, question
    assert first_of_turn[1].content == "question 0"  # compression later dropped it: not here
    snapshot = tuple(first_of_turn)
    assert provider.requests[-1].messages[1].content != "question 0"  # compression happened
    assert first_of_turn == snapshot


async def test_a_turn_sees_the_history_as_it_was_when_it_started() -> None:
    provider = ScriptedProvider([Reply(text="one"), Reply(text="two"), Reply(text="three")])
    loop = AgentLoop(Agent(provider=provider))
    await loop.run_turn("first", session_id="s")
    await loop.run_turn("second", session_id="s")
    second = provider.requests[1].messages
    assert [m.content for m in second] == ["first", "one", "second"]
    await loop.run_turn("third", session_id="s")  # the store appends to the same session list
    assert [m.content for m in second] == ["first", "one", "second"] and len(second) == 3
    assert [m.content for m in loop.session_messages("s")][-2:] == ["third", "three"]
    loop.session_messages("s").clear()  # a caller's copy: the session is untouched
    assert len(loop.session_messages("s")) == 6


def test_slices_span_parts_and_stay_bounded() -> None:
    a, b = _msgs("a", "b", "c"), _msgs("d", "e")
    view = MessageView(a, b)
    expected = (*a, *b)
    b.append(Message("user", "later"))
    for sl in (slice(None), slice(2, None), slice(1, 4), slice(3, 10), slice(-2, None),
               slice(4, 2), slice(None, None, 2), slice(None, None, -1)):
        assert view[sl] == expected[sl], sl
