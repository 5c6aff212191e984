"""Races around a parked turn: answers from several processes at once (exactly one counts, and
exactly one resumes), an answer that lands while the turn is parking, steering and follow-ups
given to a waiting session, a parked turn discarded under its answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HumanApprover,
    MessageState,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from steerable._core._parking import record_answer
from steerable.errors import RequestClosedError, RequestError
from steerable.storage import JSONLSessionStore, SQLiteSessionStore
from steerable.tools import ToolContext
from tests.conftest import held_tool, wait_for

RAN: list[int] = []


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()  # each test counts its own runs, in whatever order the tests run


@tool(read_only=True)
def probe(n: int) -> str:
    """Probe n."""
    RAN.append(n)
    return f"probed {n}"


@tool(read_only=True)
async def pick(ctx: ToolContext) -> str:
    """Ask for a colour."""
    return "picked " + await ctx.ask("Colour?", choices=["red", "blue"])


def new_loop(store: Any, script: list[Any], **kw: Any) -> AgentLoop:
    loop = AgentLoop(Agent(name="r", provider=ScriptedProvider(script), tools=[probe, pick]),
                     store=store, park=True, permissions=[("ask", "probe")], **kw)
    loop.register_hook(HumanApprover())
    return loop


STORES: dict[str, Callable[[Path], Any]] = {
    "jsonl": lambda p: JSONLSessionStore(p / "sessions"),
    "sqlite": lambda p: SQLiteSessionStore(p / "s.db"),
}


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(STORES)), n=st.integers(1, 6),
       answerers=st.integers(2, 4), data=st.data())
def test_concurrent_answers_count_once_and_one_answerer_resumes(
        tmp_path_factory: pytest.TempPathFactory, kind: str, n: int, answerers: int,
        data: st.DataObject) -> None:
    """``answerers`` processes (threads, each with its own store object) answer every request
    of a parked turn at once, in orders of their own: each request gets exactly one answer,
    every other attempt is refused as answered, and exactly one attempt claims the resume."""
    tmp = tmp_path_factory.mktemp("race")
    make = STORES[kind]

    async def park() -> list[str]:
        loop = new_loop(make(tmp), [Reply(tool_calls=[("probe", {"n": i}) for i in range(n)])])
        result = await loop.run_turn("go", session_id="s")
        await loop.aclose()
        assert result.status is TurnStatus.WAITING
        return [r.request_id for r in result.pending]

    ids = asyncio.run(park())
    orders = [data.draw(st.permutations(ids)) for _ in range(answerers)]
    outcomes: list[tuple[str, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(answerers)

    def answer_all(order: list[str]) -> None:
        store = make(tmp)
        start.wait()
        for rid in order:
            try:
                got = record_answer(store, rid, "approval", True, "")
                what = "resume" if got is not None else "ok"
            except RequestClosedError:
                what = "closed"
            with lock:
                outcomes.append((rid, what))

    threads = [threading.Thread(target=answer_all, args=(o,)) for o in orders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for rid in ids:
        got = [what for r, what in outcomes if r == rid]
        assert len(got) == answerers and got.count("closed") == answerers - 1
    assert [what for _, what in outcomes].count("resume") == 1


async def test_an_answer_given_as_the_turn_parks_is_used_once(tmp_path: Path) -> None:
    loop = new_loop(JSONLSessionStore(tmp_path), [Reply(tool_calls=[("pick", {})]),
                                                  Reply(text="done")])

    answered = threading.Event()

    class AnswerAtOnce:
        event_kinds = (EventKind.QUESTION_ASKED,)

        def on_event(self, event: Any) -> None:  # (in a thread of its own: a sync observer)
            loop.answer(event.request_id, "blue")  # live, late (parking) or parked: once
            answered.set()

    loop.register_hook(AnswerAtOnce())
    first = await loop.run_turn("go", session_id="s")
    # Whichever window the answer fell in, the turn it resumes (if any) has started once the
    # observer's thread got its answer back: only then is waiting for idle waiting for it.
    assert await asyncio.to_thread(answered.wait, 10)
    await loop.wait_idle()
    assert first.status in (TurnStatus.WAITING, TurnStatus.COMPLETED)
    tools = [m.content for m in loop.session_messages("s") if m.role == "tool"]
    assert tools == ["picked blue"] and loop.pending_requests() == []
    assert loop.checkpoint("s") is None
    await loop.aclose()


async def test_an_answer_while_the_parked_calls_group_still_runs_is_kept_for_the_turn(
        tmp_path: Path) -> None:
    """The question parks at once, but the turn writes its checkpoint only once the other
    call of its group ends: an answer given in between is taken (True, not "unknown"), a
    second one is refused, and the turn resumes with the first as soon as it has parked."""
    hold, gate = held_tool()
    provider = ScriptedProvider([Reply(tool_calls=[("pick", {}), ("hold", {})]),
                                 Reply(text="done")])
    loop = AgentLoop(Agent(name="r", provider=provider, tools=[pick, hold]),
                     store=JSONLSessionStore(tmp_path), park=True)
    sub = loop.subscribe([EventKind.QUESTION_ASKED])
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, EventKind.QUESTION_ASKED)
    assert loop.answer(asked.request_id, "blue") is True
    with pytest.raises(RequestClosedError,
                       match=f"^request {asked.request_id} was answered already$"):
        loop.answer(asked.request_id, "red")
    gate.set()
    assert (await handle).status is TurnStatus.WAITING
    await loop.wait_idle()  # the answer kept while it parked resumes it
    tools = [m.content for m in loop.session_messages("s") if m.role == "tool"]
    assert tools == ["picked blue", "held"] and loop.pending_requests() == []
    assert loop.checkpoint("s") is None
    await loop.aclose()


async def test_an_approval_while_the_parked_calls_group_still_runs_is_kept_for_the_turn(
        tmp_path: Path) -> None:
    hold, gate = held_tool()
    provider = ScriptedProvider([Reply(tool_calls=[("probe", {"n": 3}), ("hold", {})]),
                                 Reply(text="done")])
    loop = AgentLoop(Agent(name="r", provider=provider, tools=[probe, hold]),
                     store=JSONLSessionStore(tmp_path), park=True,
                     permissions=[("ask", "probe")])
    loop.register_hook(HumanApprover())
    sub = loop.subscribe([EventKind.APPROVAL_REQUESTED])
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, EventKind.APPROVAL_REQUESTED)
    assert loop.resolve_approval(asked.request_id, True) is True
    gate.set()
    assert (await handle).status is TurnStatus.WAITING
    await loop.wait_idle()  # the approval kept while it parked resumes it: probe runs once
    tools = [m.content for m in loop.session_messages("s") if m.role == "tool"]
    assert tools == ["probed 3", "held"] and RAN == [3]
    await loop.aclose()


async def test_steering_and_follow_ups_for_a_waiting_session_wait_with_it(
        tmp_path: Path) -> None:
    provider_seen: list[list[str]] = []

    def final(request: Any) -> Reply:
        provider_seen.append([m.content for m in request.messages if m.role == "user"])
        return Reply(text="ok")

    first = new_loop(JSONLSessionStore(tmp_path), [Reply(tool_calls=[("probe", {"n": 1})])])
    result = await first.run_turn("go", session_id="s")
    sub = first.subscribe(kinds=[EventKind.MESSAGE_STATE])
    steer = first.inject_steering("also check the logs", "s")
    later = first.inject_follow_up("then summarise", "s")
    assert steer and later and steer.state is MessageState.QUEUED
    assert [e.state for e in sub.drain_nowait()] == [MessageState.QUEUED] * 2
    assert not first.inject_steering("x", "nobody")  # no turn, none parked: refused as before
    await first.aclose()

    second = new_loop(JSONLSessionStore(tmp_path), [final])  # another process
    sub = second.subscribe(kinds=[EventKind.MESSAGE_STATE])
    resumed = await second.resolve_approval(result.pending[0].request_id, True)
    assert resumed.status is TurnStatus.COMPLETED
    assert provider_seen == [["go", "also check the logs"]]
    assert resumed.follow_ups == ("then summarise",)
    assert resumed.follow_up_ids == (later.message_id,)
    states = {(e.message_id, e.state) for e in sub.drain_nowait()}
    assert (steer.message_id, MessageState.DELIVERED) in states
    await second.aclose()


async def test_a_parked_turn_discarded_refuses_its_answers_and_cancel_finds_nothing(
        tmp_path: Path) -> None:
    loop = new_loop(JSONLSessionStore(tmp_path), [Reply(tool_calls=[("probe", {"n": 1})]),
                                                  Reply(text="fresh")])
    result = await loop.run_turn("go", session_id="s")
    assert loop.cancel("s") is None  # nothing runs: a parked turn is not a running one
    assert loop.interrupt_hard("s") is False
    fresh = await loop.run_turn("start over", session_id="s", discard_checkpoint=True)
    assert fresh.status is TurnStatus.COMPLETED
    with pytest.raises(RequestError, match="no longer open"):
        loop.resolve_approval(result.pending[0].request_id, True)
    assert loop.pending_requests() == [] and RAN == []
    await loop.aclose()


async def test_a_cancel_of_the_resumed_turn_keeps_the_answer_used(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def slow(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="late")

    loop = new_loop(JSONLSessionStore(tmp_path), [Reply(tool_calls=[("probe", {"n": 7})]), slow])
    result = await loop.run_turn("go", session_id="s")
    sub = loop.subscribe([EventKind.LLM_REQUEST])
    handle = loop.resolve_approval(result.pending[0].request_id, True)
    await wait_for(sub, EventKind.LLM_REQUEST)  # the approved call ran; the model call waits
    assert RAN == [7]
    assert loop.interrupt_hard("s")
    aborted = await handle
    assert aborted.status is TurnStatus.ABORTED
    with pytest.raises(RequestClosedError):
        loop.resolve_approval(result.pending[0].request_id, True)
    assert RAN == [7] and loop.pending_requests() == []
    await loop.aclose()
