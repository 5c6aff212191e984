"""A tool's question (``ctx.ask``) as A2A ``INPUT_REQUIRED`` on a real ``steerable serve``,
driven by the official ``a2a-sdk`` client: the next message answers it (a choice as text; a
form as a data part or JSON text; one that does not fit keeps the task waiting, saying why);
an MCP server's question the same way; and the turn view follows a parked turn into the turn
that resumes it instead of ending the task."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a.client", reason="the a2a extra is not installed")

from a2a.helpers import get_data_parts, new_data_part
from a2a.types import SubscribeToTaskRequest

from steerable.protocols.a2a._updates import End, Progress, TurnView
from tests.protocols._a2a_client import DONE, IR, peer, state, states, task_id, texts
from tests.protocols._serving import served  # noqa: F401 (fixture)

ASKING = Path(__file__).resolve().parents[1] / "integrations" / "asking_mcp_server.py"


async def test_a_question_is_input_required_until_a_message_answers(
        served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["ask_user", {"question": "Which size?",
                                                "choices": ["S", "M"]}]]},
                  {"text": "M it is"}])
    async with peer(url) as a2a:
        [first] = await a2a.send("pick a size", context="q1", stream=False)
        assert state(first.task) == IR
        [asked] = get_data_parts(first.task.status.message.parts)
        assert asked["question"]["question"] == "Which size?"
        assert asked["question"]["choices"] == ["S", "M"]
        tid = first.task.id
        [again] = await a2a.send("XL", context="q1", task=tid, stream=False)
        assert state(again.task) == IR  # not one of the choices: asked again, saying why
        assert "not one of the choices" in again.task.status.message.parts[0].text
        answered = await a2a.send("m", context="q1", task=tid)
    assert "answered" in texts(answered) and states(answered)[-1] == DONE
    assert any(t.startswith("tool ask_user done: The user answered: M") for t in texts(answered))


async def test_an_mcp_servers_form_answered_with_data(served: Any, tmp_path: Path) -> None:  # noqa: F811
    config = ("[permissions]\nallow = [\"mcp__ask__*\"]\n[mcp_servers.ask]\n"
              f"command = {json.dumps(sys.executable)}\n"
              f"args = [{json.dumps(str(ASKING))}, \"2026\"]\n"
              f"env = {{ MCP_TEST_MARKS = {json.dumps(str(tmp_path))} }}\n")
    url = served([{"tool_calls": [["mcp__ask__book", {"city": "Oslo"}]]}, {"text": "booked"}],
                 config=config)
    async with peer(url) as a2a:
        first = await a2a.send("book it", context="q2")
        assert states(first)[-1] == IR
        asked = get_data_parts(first[-1].status_update.status.message.parts)[0]["question"]
        assert asked["question"].startswith("MCP server 'ask' asks: Which date")
        tid = task_id(first)
        wrong = await a2a.send(new_data_part({"day": "May 1"}), context="q2", task=tid)
        assert states(wrong) == [IR] and "does not fit" in texts(wrong)[0]
        dated = await a2a.send(new_data_part({"date": "May 1"}), context="q2", task=tid)
        # Both questions of the round were asked at once: the task now waits on the other.
        assert states(dated)[-1] == IR
        seats = await a2a.send('{"seats": 2}', context="q2", task=tid)  # JSON text works too
    assert states(seats)[-1] == DONE
    assert any(t.startswith("tool mcp__ask__book done: booked Oslo on May 1 for 2")
               for t in texts(seats))


async def test_a_question_answered_elsewhere_goes_on_without_a_message(
        served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["ask_user", {"question": "Which size?"}]]},
                  {"text": "L then"}])
    async with peer(url) as a2a:
        first = await a2a.send("pick a size", context="q3")
        assert states(first)[-1] == IR
        rid = get_data_parts(first[-1].status_update.status.message.parts)[0]["question"][
            "request_id"]
        stream = aiter(a2a.stream.subscribe(SubscribeToTaskRequest(id=task_id(first))))
        now = await anext(stream)  # subscribed: the task as it is
        assert state(now.task) == IR
        answered = await a2a.http.post(f"{url}/v1/requests/{rid}", json={"value": "L"})
        assert answered.status_code == 200, answered.text
        rest = [r async for r in stream]
    assert "answered elsewhere" in texts(rest) and states(rest)[-1] == DONE
    assert any(t.startswith("tool ask_user done: The user answered: L") for t in texts(rest))


def test_a_parked_turn_is_followed_into_the_turn_that_resumes_it() -> None:
    view = TurnView("t1")
    assert view.feed(1, {"kind": "turn_end", "turn_id": "t1", "status": "waiting"}) is None
    assert view.feed(2, {"kind": "turn_start", "turn_id": "t9"}) is None  # someone else's
    resumed = view.feed(3, {"kind": "turn_start", "turn_id": "t2", "resumed_from": "t1"})
    assert isinstance(resumed, Progress) and resumed.kind == "turn_resumed"
    end = view.feed(4, {"kind": "turn_end", "turn_id": "t2", "status": "completed",
                        "text": "done"})
    assert isinstance(end, End) and end.state == DONE and end.text == "done"
