"""AG-UI interrupts on a real ``steerable serve``: questions (``ctx.ask``) and approvals end the
run with the interrupt outcome, every event parsed with the ``ag_ui.core`` models; the next
run's resume entries answer them (checked first: a bad one changes nothing) and the same turn
goes on; a resume that leaves some open ends at once with those; a question parked by another
process is resumed by an AG-UI run; an MCP server's question is an interrupt like any other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ag_ui.core", reason="the agui extra is not installed")

import httpx
from ag_ui.core import EventType

from tests.protocols._serving import agent_args, env, served  # noqa: F401 (fixture)
from tests.protocols.test_agui import run_input, stream, types

ASK = [["ask_user", {"question": "Which size?", "choices": ["S", "M"]}]]


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def interrupts(events: list[Any]) -> list[Any]:
    assert events[-1].type is EventType.RUN_FINISHED and events[-1].outcome.type == "interrupt"
    return list(events[-1].outcome.interrupts)


def results(events: list[Any]) -> list[str]:
    return [e.content for e in events if e.type is EventType.TOOL_CALL_RESULT]


async def test_a_question_is_an_interrupt_the_next_run_answers(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": ASK}, {"text": "size M it is"}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream(client, run_input("q1", "pick a size"))
        [asked] = interrupts(first)
        assert (asked.reason, asked.message) == ("input_required", "Which size?")
        assert asked.response_schema == {"type": "string", "enum": ["S", "M"]}
        assert asked.tool_call_id == next(
            e.tool_call_id for e in first if e.type is EventType.TOOL_CALL_START)
        bad = await client.post("/v1/agui", json=run_input("q1", resume=[resolved(asked.id, "XL")]))
        assert bad.status_code == 400 and "not one of the choices" in bad.json()["error"]
        listed = (await client.get("/v1/requests", params={"session_id": "q1"})).json()
        assert [r["request_id"] for r in listed["requests"]] == [asked.id]  # still open
        second = await stream(client, run_input("q1", resume=[resolved(asked.id, "M")]))
    assert types(second)[0] == "RUN_STARTED" and second[-1].outcome.type == "success"
    assert results(second) == ["The user answered: M"]
    assert second[-1].result == "size M it is"


async def test_two_questions_at_once_and_a_resume_that_answers_one(
        served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [*ASK, ["ask_user", {"question": "Which colour?"}]]},
                  {"text": "noted"}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream(client, run_input("q2", "ask me"))
        both = {i.message: i for i in interrupts(first)}
        assert set(both) == {"Which size?", "Which colour?"}
        assert both["Which colour?"].response_schema == {"type": "string"}
        twice = await client.post("/v1/agui", json=run_input("q2", resume=[
            resolved(both["Which size?"].id, "S"), resolved(both["Which size?"].id, "S")]))
        assert twice.status_code == 400 and "twice" in twice.json()["error"]
        half = await stream(client, run_input("q2", resume=[resolved(both["Which size?"].id,
                                                                     "S")]))
        # The other one still waits: the run ends on it at once.
        assert types(half) == ["RUN_STARTED", "RUN_FINISHED"]
        assert [i.id for i in interrupts(half)] == [both["Which colour?"].id]
        rest = await stream(client, run_input("q2", resume=[resolved(both["Which colour?"].id,
                                                                     "teal")]))
    assert sorted(results(rest)) == ["The user answered: S", "The user answered: teal"]
    assert rest[-1].outcome.type == "success" and rest[-1].result == "noted"


async def test_approvals_one_after_the_other(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["write", {"path": "x.txt", "content": "1"}],
                                  ["write", {"path": "y.txt", "content": "2"}]]},
                  {"text": "wrote one"}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream(client, run_input("a1", "write both"))
        [x] = interrupts(first)
        assert x.metadata["arguments"]["path"] == "x.txt"
        second = await stream(client, run_input("a1", resume=[resolved(x.id, {"approved": True})]))
        [y] = interrupts(second)  # x ran, then y asks
        assert y.metadata["arguments"]["path"] == "y.txt"
        assert len(results(second)) == 1
        bad = await client.post("/v1/agui", json=run_input("a1", resume=[resolved(y.id, "yes")]))
        assert bad.status_code == 400 and "approved" in bad.json()["error"]
        third = await stream(client, run_input("a1", resume=[{"interruptId": y.id,
                                                              "status": "cancelled"}]))
    assert results(third) == ["not run (denied): cancelled"]
    assert third[-1].outcome.type == "success" and third[-1].result == "wrote one"


async def test_a_question_parked_by_another_process(served: Any, tmp_path: Path) -> None:  # noqa: F811
    parked = subprocess.run([sys.executable, "-m", "steerable", "run", "pick a size", "--json",
                             *agent_args(tmp_path, [{"tool_calls": ASK}])],
                            env=env(tmp_path), capture_output=True, text=True, timeout=60)
    assert parked.returncode == 5, parked.stderr  # parked in the store; nobody is up
    thread = json.loads(parked.stdout.splitlines()[0])["session_id"]
    url = served([{"text": "S then"}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        [req] = (await client.get("/v1/requests", params={"session_id": thread})).json()[
            "requests"]
        resumed = await stream(client, run_input(thread, resume=[resolved(req["request_id"],
                                                                          "S")]))
    assert results(resumed) == ["The user answered: S"]
    assert resumed[-1].outcome.type == "success" and resumed[-1].result == "S then"


async def test_an_mcp_servers_question_is_an_interrupt(served: Any, tmp_path: Path) -> None:  # noqa: F811
    asking = Path(__file__).resolve().parents[1] / "integrations" / "asking_mcp_server.py"
    config = ("[permissions]\nallow = [\"mcp__ask__*\"]\n[mcp_servers.ask]\n"
              f"command = {json.dumps(sys.executable)}\n"
              f"args = [{json.dumps(str(asking))}, \"2026\"]\n"
              f"env = {{ MCP_TEST_MARKS = {json.dumps(str(tmp_path))} }}\n")
    url = served([{"tool_calls": [["mcp__ask__delete", {"path": "a.txt"}]]}, {"text": "gone"}],
                 config=config)
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream(client, run_input("m1", "delete it"))
        [sure] = interrupts(first)
        assert sure.message == "MCP server 'ask' asks: Delete a.txt?"
        assert sure.response_schema == {"type": "string", "enum": ["accept", "decline"]}
        second = await stream(client, run_input("m1", resume=[resolved(sure.id, "accept")]))
    assert results(second) == ["deleted a.txt"] and second[-1].result == "gone"


def test_resume_entries_are_all_checked_before_any_is_answered() -> None:
    """Whatever the entries, either every one maps to a distinct waiting request with an answer
    that fits it, or ``BadResume`` is raised (and the caller answers nothing)."""
    from ag_ui.core.types import ResumeEntry
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from steerable.protocols._agui_interrupts import BadResume, answers_for

    waiting = {
        "a": {"request_id": "a", "kind": "approval", "tool_name": "write", "call_id": "c1",
              "session_id": "s", "arguments": {}},
        "q": {"request_id": "q", "kind": "question", "tool_name": "ask_user", "call_id": "c2",
              "session_id": "s", "question": "Size?", "choices": ["S", "M"], "schema": None},
        "n": {"request_id": "n", "kind": "question", "tool_name": "t", "call_id": "c3",
              "session_id": "s", "question": "How many?", "choices": None,
              "schema": {"type": "integer", "minimum": 1}},
    }
    payloads = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["S", "M", "L"]),
                         st.fixed_dictionaries({"approved": st.booleans()}),
                         st.dictionaries(st.sampled_from(["approved", "reason"]),
                                         st.one_of(st.booleans(), st.text(max_size=3))))
    entries = st.lists(st.builds(ResumeEntry, interrupt_id=st.sampled_from(["a", "q", "n", "x"]),
                                 status=st.sampled_from(["resolved", "cancelled"]),
                                 payload=payloads), max_size=4)

    @settings(max_examples=300, deadline=None)
    @given(entries)
    def check(given_entries: list[ResumeEntry]) -> None:
        try:
            answers = answers_for(given_entries, waiting)
        except BadResume:
            return
        ids = [a.request_id for a in answers]
        assert ids == [e.interrupt_id for e in given_entries] and len(set(ids)) == len(ids)
        for answer in answers:
            if waiting[answer.request_id]["kind"] == "approval":
                assert isinstance(answer.approved, bool) and answer.value is None
            else:
                assert answer.approved is None
                assert answer.value in ("S", "M") if answer.request_id == "q" else \
                    isinstance(answer.value, int) and answer.value >= 1

    check()
