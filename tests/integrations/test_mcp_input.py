"""What an MCP server asks of the person becomes the calling tool's questions: answered live,
or parked with the turn and answered from another loop over the same store, after which the
call is made again and the server gets the recorded answers. Against a real server subprocess
written with the official SDK, in both eras: ``input_required`` rounds (2026-07-28) and
``elicitation/create`` in the middle of the call (the 2025 revisions)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, Timeouts, TurnStatus
from steerable.errors import InvalidAnswerError
from steerable.integrations.mcp import MCPServer
from steerable.integrations.mcp._input import question_for, response_for
from steerable.storage import JSONLSessionStore

ASKING = Path(__file__).with_name("asking_mcp_server.py")
ERAS = {"2026": "2026-07-28", "2025": "2025-11-25"}
K = EventKind


def asking(era: str, **kw: Any) -> MCPServer:
    return MCPServer("ask", command=sys.executable, args=[str(ASKING), era], **kw)


def loop_over(tools: list[Any], script: list[Reply], **kw: Any) -> AgentLoop:
    agent = Agent(name="a", tools=tools, provider=ScriptedProvider(script))
    return AgentLoop(agent, permissions=[("allow", "mcp__*")], **kw)


def calls(marks: Path) -> list[str]:
    path = marks / "calls"
    return path.read_text().splitlines() if path.exists() else []


async def answer_live(loop: AgentLoop, answers: dict[str, Any], asked: list[Any]) -> None:
    """Answer each question as it comes, by the first words of what the server asked."""
    sub = loop.subscribe(buffer=1000)
    async for event in sub:
        if event.kind is K.QUESTION_ASKED:
            asked.append(event)
            said = event.question.split("asks: ", 1)[1]
            loop.answer(event.request_id, next(v for k, v in answers.items()
                                               if said.startswith(k)))
        elif event.kind is K.TURN_END:
            return


@pytest.mark.parametrize("era", ["2026", "2025"])
async def test_questions_answered_live(era: str, marks: Path) -> None:
    async with asking(era) as server:
        assert server.protocol_version == ERAS[era]
        loop = loop_over(await server.tools(), [
            Reply(tool_calls=[("mcp__ask__book", {"city": "Oslo"})]), Reply(text="done")])
        asked: list[Any] = []
        answering = asyncio.ensure_future(answer_live(
            loop, {"Which date": {"date": "May 1"}, "How many": {"seats": 2}}, asked))
        await asyncio.sleep(0)
        sub = loop.subscribe(buffer=1000)
        result = await loop.run_turn("book it", session_id="s")
        await answering
        await loop.aclose()
    ends = [e.content for e in sub.drain_nowait() if e.kind is K.TOOL_EXEC_END]
    assert result.status is TurnStatus.COMPLETED and ends == ["booked Oslo on May 1 for 2"]
    # Asked as forms: JSON that fits, or a decline.
    assert [q.question.splitlines()[0] for q in asked] == [
        "MCP server 'ask' asks: Which date do you travel to Oslo?",
        "MCP server 'ask' asks: How many seats?"]
    assert asked[0].schema["anyOf"][1] == {"const": "decline"}
    assert all(q.tool_name == "mcp__ask__book" for q in asked)
    assert calls(marks) == ["book Oslo May 1 2"]


@pytest.mark.parametrize("era", ["2026", "2025"])
async def test_a_parked_question_resumes_the_call_from_another_loop(
        era: str, marks: Path, tmp_path: Path) -> None:
    async with asking(era) as server:
        first = loop_over(await server.tools(), [
            Reply(tool_calls=[("mcp__ask__book", {"city": "Rome"})])],
            store=JSONLSessionStore(tmp_path), park=True)
        waiting = await first.run_turn("book it", session_id="s")
        await first.aclose()
    assert waiting.status is TurnStatus.WAITING
    # A 2026 server asks both at once (one round); a 2025 server one at a time.
    asked = [r.question.splitlines()[0].split("asks: ")[1] for r in waiting.pending]
    assert asked == (["Which date do you travel to Rome?", "How many seats?"] if era == "2026"
                     else ["Which date do you travel to Rome?"])
    assert calls(marks) == []

    async with asking(era) as server:  # another process, days later
        second = loop_over(await server.tools(), [Reply(text="booked")],
                           store=JSONLSessionStore(tmp_path), park=True)
        [date] = [r for r in second.pending_requests("s") if "date" in r.question]
        with pytest.raises(InvalidAnswerError):  # not the form, not a decline: stays open
            second.answer(date.request_id, {"day": "June 2"})
        got = second.answer(date.request_id, {"date": "June 2"})
        if era == "2026":
            assert got is True  # the turn still waits for the seats
            [seats] = second.pending_requests("s")
            got = second.answer(seats.request_id, {"seats": 3})
        assert not isinstance(got, bool)
        resumed = await got
        if era == "2025":  # the re-run call got the date back, then the server asked on
            assert resumed.status is TurnStatus.WAITING
            [seats] = resumed.pending
            assert "How many seats?" in seats.question
            resumed = await second.answer(seats.request_id, {"seats": 3})  # type: ignore[misc]
        await second.aclose()
    assert resumed.status is TurnStatus.COMPLETED and resumed.text == "booked"
    tool_message = second.session_messages("s")[2]
    assert tool_message.text == "booked Rome on June 2 for 3"
    assert calls(marks) == ["book Rome June 2 3"]  # the tool's body ran once


@pytest.mark.parametrize("era", ["2026", "2025"])
async def test_a_decline_and_a_confirmation(era: str, marks: Path) -> None:
    async with asking(era) as server:
        loop = loop_over(await server.tools(), [
            Reply(tool_calls=[("mcp__ask__delete", {"path": "a.txt"})]),
            Reply(tool_calls=[("mcp__ask__book", {"city": "Oslo"})]), Reply(text="ok")])
        asked: list[Any] = []
        answering = asyncio.ensure_future(answer_live(
            loop, {"Delete": "accept", "Which date": "decline", "How many": "decline"}, asked))
        await asyncio.sleep(0)
        sub = loop.subscribe(buffer=1000)
        await loop.run_turn("go", session_id="s")
        await answering
        await loop.aclose()
    assert asked[0].choices == ("accept", "decline") and asked[0].schema is None
    ends = [e.content for e in sub.drain_nowait() if e.kind is K.TOOL_EXEC_END]
    assert ends[0] == "deleted a.txt" and ends[1].startswith("not booked (decline")


async def test_the_deadline_stops_while_the_person_answers(marks: Path) -> None:
    async with asking("2026", timeout=0.5) as server:
        loop = loop_over(await server.tools(), [
            Reply(tool_calls=[("mcp__ask__delete", {"path": "b"})]), Reply(text="ok")])
        sub = loop.subscribe(buffer=1000)

        async def slow_answer() -> None:
            async for event in sub:
                if event.kind is K.QUESTION_ASKED:
                    await asyncio.sleep(1.0)  # twice the call's whole deadline
                    loop.answer(event.request_id, "accept")
                    return

        answering = asyncio.ensure_future(slow_answer())
        result = await loop.run_turn("go", session_id="s")
        await answering
        await loop.aclose()
    assert result.status is TurnStatus.COMPLETED
    assert loop.session_messages("s")[2].text == "deleted b"


@pytest.mark.parametrize("era", ["2026", "2025"])
async def test_a_question_nobody_answers_fails_the_call_not_the_server(
        era: str, marks: Path) -> None:
    async with asking(era) as server:
        loop = loop_over(await server.tools(), [
            Reply(tool_calls=[("mcp__ask__delete", {"path": "c"})]),
            Reply(tool_calls=[("mcp__ask__summarize", {})]), Reply(text="ok")],
            timeouts=Timeouts(approval=0.3))
        await loop.run_turn("go", session_id="s")
        await loop.aclose()
        starts = server.starts
    results = [m.text for m in loop.session_messages("s") if m.role == "tool"]
    assert "Nobody answered the question" in results[0]
    # Sampling is not offered: an error result, at once, whatever the era.
    assert "sampling" in results[1].lower() and starts == 1
    assert calls(marks) == []  # the call was cancelled on the server before it went on


def test_how_an_elicitation_reads_and_what_an_answer_sends() -> None:
    from mcp import types

    url = types.ElicitRequestURLParams(message="Sign in", url="https://x.example/auth")
    question, choices, schema = question_for("gh", url)
    assert "Open https://x.example/auth" in question and choices == ("accept", "decline")
    assert response_for(url, "accept").action == "accept"
    assert response_for(url, "decline").action == "decline"
    form = types.ElicitRequestFormParams(message="Name?", requested_schema={
        "type": "object", "properties": {"name": {"type": "string"}}})
    _, choices, schema = question_for("gh", form)
    assert choices is None and schema is not None
    sent = response_for(form, {"name": "Ann"})
    assert (sent.action, sent.content) == ("accept", {"name": "Ann"})


def test_any_answer_that_fits_the_question_is_a_response_the_server_takes() -> None:
    """For flat forms (MCP's restricted schemas) and any JSON answer: either the question
    refuses it (it stays open), or it becomes an ElicitResult (accept with the form's fields,
    or decline), or a ToolError the model reads; never anything else."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from mcp import types

    from steerable._core._requests import check_answer
    from steerable.errors import InvalidAnswerError, ToolError

    field = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number"},
                             {"type": "boolean"}, {"type": "string", "enum": ["a", "b"]}, {}])
    forms = st.dictionaries(st.sampled_from(["x", "y", "z"]), field, max_size=3).map(
        lambda props: {"type": "object", "properties": props})
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(max_size=5))
    answers = st.one_of(leaf, st.just("decline"), st.just("accept"),
                        st.dictionaries(st.sampled_from(["x", "y", "w"]),
                                        st.one_of(leaf, st.lists(leaf, max_size=2),
                                                  st.dictionaries(st.text(max_size=2), leaf,
                                                                  max_size=1)), max_size=3))

    @settings(max_examples=400, deadline=None)
    @given(forms, answers)
    def check(form: dict[str, Any], answer: Any) -> None:
        params = types.ElicitRequestFormParams(message="Fill it", requested_schema=form)
        _, choices, schema = question_for("s", params)
        try:
            value = check_answer(answer, choices, schema)
        except InvalidAnswerError:
            return
        try:
            sent = response_for(params, value)
        except ToolError:
            return
        assert sent.action in ("accept", "decline")
        if sent.action == "accept" and form["properties"]:
            assert set(sent.content or {}) <= set(form["properties"])

    check()
