"""Parking: an open approval or question ends the turn WAITING; any loop over the same store
answers it and resumes the turn, exactly once, with every store."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HumanApprover,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from steerable._core._parking import record_answer
from steerable.errors import (
    CheckpointError,
    InvalidAnswerError,
    RequestClosedError,
    UnknownRequestError,
)
from steerable.tools import ToolContext
from tests.conftest import of

K = EventKind
RUNS: list[str] = []


@tool
def write(path: str) -> str:
    """Write a path."""
    RUNS.append(path)
    return f"wrote {path}"


@tool(read_only=True)
def probe(n: int) -> str:
    """Probe something."""
    RUNS.append(f"probe{n}")
    return f"probed {n}"


@tool(read_only=True)
async def survey(ctx: ToolContext) -> str:
    """Ask two questions."""
    RUNS.append(f"survey resumed={ctx.resumed}")
    name = await ctx.ask("Name?")
    RUNS.append(f"after name {name}")
    size = await ctx.ask("Size?", choices=["S", "M", "L"])
    return f"{name}/{size}"


@tool(read_only=True)
async def count(ctx: ToolContext) -> str:
    """Ask for a number."""
    return f"n={await ctx.ask('How many?', schema={'type': 'integer', 'minimum': 1})}"


TOOLS = [write, probe, survey, count]


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def new_loop(store: Any, script: list[Any], **kw: Any) -> AgentLoop:
    agent = Agent(name="main", provider=ScriptedProvider(script), tools=TOOLS)
    loop = AgentLoop(agent, store=store, park=True, **kw)
    loop.register_hook(HumanApprover())
    return loop


async def test_an_approval_parks_and_another_loop_resumes_it(make_store: Callable[[], Any]) -> None:
    first = new_loop(make_store(), [Reply(tool_calls=[("write", {"path": "a"})])])
    sub = first.subscribe()
    result = await first.run_turn("go", session_id="s")
    assert result.status is TurnStatus.WAITING and RUNS == []
    [req] = result.pending
    assert (req.kind, req.tool_name, req.arguments, req.session_id) == \
        ("approval", "write", {"path": "a"}, "s")
    events = sub.drain_nowait()
    assert [e.request_id for e in of(events, K.APPROVAL_REQUESTED)] == [req.request_id]
    assert of(events, K.APPROVAL_RESOLVED) == []  # still open: nothing denied it
    assert of(events, K.TURN_END)[0].status is TurnStatus.WAITING
    assert [r.request_id for r in first.pending_requests()] == [req.request_id]
    await first.aclose()

    second = new_loop(make_store(), [Reply(text="done")])
    assert [r.request_id for r in second.pending_requests("s")] == [req.request_id]
    sub = second.subscribe()
    handle = second.resolve_approval(req.request_id, True)
    assert not isinstance(handle, bool)
    resumed = await handle
    assert resumed.status is TurnStatus.COMPLETED and resumed.text == "done"
    assert RUNS == ["a"]
    events = sub.drain_nowait()
    assert [(e.request_id, e.approved) for e in of(events, K.APPROVAL_RESOLVED)] == \
        [(req.request_id, True)]
    assert of(events, K.APPROVAL_REQUESTED) == []  # the approver was not asked again
    history = second.session_messages("s")
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert second.pending_requests() == []
    with pytest.raises(RequestClosedError, match=rf"^request {req.request_id} was answered "
                       r"already \(an answer counts once\)$"):  # refused, the call ran once
        second.resolve_approval(req.request_id, True)
    assert RUNS == ["a"]
    await second.aclose()


async def test_an_answer_that_loses_the_race_for_the_index_is_refused(
        make_store: Callable[[], Any]) -> None:
    loop = new_loop(make_store(), [Reply(tool_calls=[("write", {"path": "a"})])])
    [req] = (await loop.run_turn("go", session_id="s")).pending
    store = make_store()
    answer = store.answer_request

    def another_answers_first(request_id: str, value: Any) -> bool:
        # Another process wrote its answer between this one's checks and its write.
        assert answer(request_id, {"value": False, "reason": "other"})
        return bool(answer(request_id, value))

    store.answer_request = another_answers_first
    with pytest.raises(RequestClosedError, match=rf"^request {req.request_id} was answered "
                       r"already \(an answer counts once\)$"):
        record_answer(store, req.request_id, "approval", True, "mine")
    await loop.aclose()


@pytest.mark.parametrize("moved_on", ["gone", "replaced"])
async def test_an_answer_to_a_turn_whose_checkpoint_is_gone_is_refused(
        make_store: Callable[[], Any], moved_on: str) -> None:
    loop = new_loop(make_store(), [Reply(tool_calls=[("write", {"path": "a"})])])
    [req] = (await loop.run_turn("go", session_id="s")).pending
    other = make_store()
    if moved_on == "gone":
        other.delete_checkpoint("s")  # another process dropped it; the index still has it
    else:  # the session's checkpoint is another one now, without this request
        other.save_checkpoint(dataclasses.replace(other.load_checkpoint("s"), requests=()))
    with pytest.raises(RequestClosedError, match=rf"^request {req.request_id} is no longer "
                       "open: it was answered, or its turn moved on$"):
        loop.resolve_approval(req.request_id, True)
    assert RUNS == []
    await loop.aclose()


async def test_a_denied_parked_approval_skips_the_call(make_store: Callable[[], Any]) -> None:
    loop = new_loop(make_store(), [Reply(tool_calls=[("write", {"path": "a"})]),
                                   Reply(text="ok")])
    result = await loop.run_turn("go", session_id="s")
    sub = loop.subscribe()
    resumed = await loop.resolve_approval(result.pending[0].request_id, False, "not now")
    assert resumed.status is TurnStatus.COMPLETED and RUNS == []
    [skip] = of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)
    assert (skip.reason, skip.detail) == ("denied", "not now")
    await loop.aclose()


async def test_a_question_replays_its_answers_to_the_re_run_tool(
        make_store: Callable[[], Any]) -> None:
    loop = new_loop(make_store(), [Reply(tool_calls=[("survey", {})])])
    first = await loop.run_turn("go", session_id="s")
    [name_q] = first.pending
    assert (first.status, name_q.question) == (TurnStatus.WAITING, "Name?")
    await loop.aclose()

    loop = new_loop(make_store(), [])
    second = await loop.answer(name_q.request_id, "Ada")
    assert second.status is TurnStatus.WAITING  # the tool asked its second question
    [size_q] = second.pending
    assert (size_q.question, size_q.choices, size_q.index) == ("Size?", ("S", "M", "L"), 1)
    with pytest.raises(InvalidAnswerError):
        loop.answer(size_q.request_id, "XL")
    assert [r.request_id for r in loop.pending_requests()] == [size_q.request_id]
    await loop.aclose()

    loop = new_loop(make_store(), [Reply(text="thanks")])
    third = await loop.answer(size_q.request_id, "M")
    assert third.status is TurnStatus.COMPLETED
    tool_msg = next(m for m in loop.session_messages("s") if m.role == "tool")
    assert tool_msg.content == "Ada/M"
    # Re-run from the start each time; each ask before the open one returned its answer.
    assert RUNS == ["survey resumed=False", "survey resumed=True", "after name Ada",
                    "survey resumed=True", "after name Ada"]
    await loop.aclose()


async def test_an_answer_failing_the_schema_leaves_the_parked_question_open(
        make_store: Callable[[], Any]) -> None:
    loop = new_loop(make_store(), [Reply(tool_calls=[("count", {})]), Reply(text="ok")])
    [q] = (await loop.run_turn("go", session_id="s")).pending
    for bad in ("two", 0, [1]):
        with pytest.raises(InvalidAnswerError):
            loop.answer(q.request_id, bad)
    assert [r.request_id for r in loop.pending_requests()] == [q.request_id]
    done = await loop.answer(q.request_id, 2)
    assert done.status is TurnStatus.COMPLETED
    assert [m.content for m in loop.session_messages("s") if m.role == "tool"] == ["n=2"]
    with pytest.raises(RequestClosedError):
        loop.answer(q.request_id, 3)
    await loop.aclose()


async def test_eight_parallel_approvals_answered_in_random_order(
        make_store: Callable[[], Any]) -> None:
    calls = [("probe", {"n": n}) for n in range(8)]
    loop = new_loop(make_store(), [Reply(tool_calls=calls)], permissions=[("ask", "probe")])
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.WAITING and len(result.pending) == 8
    await loop.aclose()
    order = list(result.pending)
    random.Random(8).shuffle(order)
    verdicts = {r.request_id: r.call_id != order[0].call_id for r in order}  # one denial
    loop = new_loop(make_store(), [Reply(text="all done")], permissions=[("ask", "probe")])
    answers = [loop.resolve_approval(r.request_id, verdicts[r.request_id]) for r in order]
    assert answers[:-1] == [True] * 7  # the turn waits for all of them
    final = await answers[-1]
    assert final.status is TurnStatus.COMPLETED
    assert sorted(RUNS) == sorted(f"probe{n}" for n in range(8)
                                  if calls[n] != ("probe", {"n": _n(order[0])}))
    tools = [m for m in loop.session_messages("s") if m.role == "tool"]
    assert len(tools) == 8 and sum(m.is_error for m in tools) == 1
    await loop.aclose()


def _n(req: Any) -> int:
    return int(req.arguments["n"]) if req.arguments else -1


async def test_a_forged_id_is_refused_and_a_waiting_turn_blocks_new_turns(
        make_store: Callable[[], Any]) -> None:
    loop = new_loop(make_store(), [Reply(tool_calls=[("write", {"path": "a"})])])
    result = await loop.run_turn("go", session_id="s")
    with pytest.raises(UnknownRequestError):
        loop.answer("question_" + "A" * 22, "x")
    assert loop.resolve_approval("approval_" + "A" * 22, True) is False
    with pytest.raises(CheckpointError, match="waits for answers"):
        loop.resume("s")
    with pytest.raises(CheckpointError, match="pending turn"):
        loop.start_turn("again", session_id="s")
    assert result.pending[0].request_id in {r.request_id for r in loop.pending_requests()}
    await loop.aclose()
