"""The events and refusals of parked requests, field by field: what a parked approval and a
parked question say when asked and when answered from another loop, what a wrong answer is
told, and messages sent to a parked turn kept in its checkpoint under their ids."""

from __future__ import annotations

import re
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HumanApprover,
    InMemorySessionStore,
    MessageState,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from steerable._core._parking import record_answer
from steerable.errors import InvalidAnswerError, RequestError, UnknownRequestError
from steerable.tools import ToolContext
from tests.conftest import of

K = EventKind


@tool
def write(path: str) -> str:
    """Write a path."""
    return f"wrote {path}"


@tool(read_only=True)
async def size(ctx: ToolContext) -> str:
    """Ask for a size."""
    return "size " + await ctx.ask("Size?", choices=["S", "M"])


def new_loop(store: Any, script: list[Any]) -> AgentLoop:
    agent = Agent(name="main", provider=ScriptedProvider(script), tools=[write, size])
    loop = AgentLoop(agent, store=store, park=True)
    loop.register_hook(HumanApprover())
    return loop


def fields(event: Any, *names: str) -> tuple[Any, ...]:
    return tuple(getattr(event, n) for n in names)


@pytest.mark.parametrize("kind", ["memory", "jsonl"])  # (a file store reads requests back)
async def test_a_parked_approval_is_asked_and_answered_with_every_field(
        kind: str, tmp_path: Any) -> None:
    from steerable.storage import JSONLSessionStore

    store: Any = InMemorySessionStore() if kind == "memory" else JSONLSessionStore(tmp_path)
    first = new_loop(store, [Reply(tool_calls=[("write", {"path": "a"})])])
    sub = first.subscribe([K.APPROVAL_REQUESTED])
    parked = await first.run_turn("go", session_id="s")
    (asked,) = sub.drain_nowait()
    rid = asked.request_id
    assert fields(asked, "turn_id", "session_id", "call_id", "tool_name", "arguments") == (
        parked.turn_id, "s", "call_1", "write", {"path": "a"})
    (req,) = first.pending_requests("s")
    assert req.created > 0 and req.turn_id == parked.turn_id
    await first.aclose()

    second = new_loop(store, [Reply(text="done")])
    (seen,) = second.pending_requests("s")  # read back from the store
    assert (seen.request_id, seen.created, seen.arguments) == (rid, req.created, {"path": "a"})
    sub = second.subscribe([K.APPROVAL_RESOLVED])
    resumed = await second.resolve_approval(rid, True, "fine")  # type: ignore[misc]
    (resolved,) = sub.drain_nowait()
    assert fields(resolved, "turn_id", "session_id", "request_id", "call_id", "tool_name",
                  "approved", "reason") == (resumed.turn_id, "s", rid, "call_1", "write",
                                            True, "fine")
    await second.aclose()


async def test_a_parked_question_is_asked_and_answered_with_every_field() -> None:
    store = InMemorySessionStore()
    first = new_loop(store, [Reply(tool_calls=[("size", {})])])
    sub = first.subscribe([K.QUESTION_ASKED])
    parked = await first.run_turn("go", session_id="s")
    assert parked.status is TurnStatus.WAITING
    (asked,) = sub.drain_nowait()
    assert fields(asked, "turn_id", "session_id", "call_id", "tool_name", "question",
                  "choices", "schema") == (parked.turn_id, "s", "call_1", "size", "Size?",
                                           ("S", "M"), None)
    await first.aclose()

    second = new_loop(store, [Reply(text="done")])
    sub = second.subscribe([K.QUESTION_ANSWERED])
    resumed = await second.answer(asked.request_id, "M")  # type: ignore[misc]
    assert resumed.messages[-2].content == "size M"
    (answered,) = sub.drain_nowait()
    assert fields(answered, "turn_id", "session_id", "request_id", "call_id", "tool_name",
                  "value", "outcome") == (resumed.turn_id, "s", asked.request_id, "call_1",
                                          "size", "M", "answered")
    await second.aclose()


async def test_a_wrong_answer_to_a_parked_request_is_refused_clearly() -> None:
    store = InMemorySessionStore()
    loop = new_loop(store, [Reply(tool_calls=[("write", {"path": "a"})]),
                            Reply(tool_calls=[("size", {})])])
    (approval,) = [r.request_id for r in (await loop.run_turn("go", session_id="s")).pending]
    (question,) = [r.request_id for r in (await loop.run_turn("go", session_id="q")).pending]

    def refused(error: type[Exception], text: str) -> Any:
        return pytest.raises(error, match=f"^{re.escape(text)}$")

    with refused(UnknownRequestError, "no open request 'nope': it was never issued here, or "
                 "its turn was discarded (pending_requests lists what waits)"):
        loop.answer("nope", "x")
    with refused(RequestError, f"request {question} is a question; answer it with "
                 "loop.answer"):
        loop.resolve_approval(question, True)
    with refused(RequestError, f"request {approval} is an approval; answer it with "
                 "loop.resolve_approval"):
        loop.answer(approval, "yes")
    with refused(InvalidAnswerError, "an approval's answer is True or False"):
        # (the loop's command refuses a non-bool first; other front ends answer here)
        record_answer(store, approval, "approval", "yes", "")
    assert [r.request_id for r in loop.pending_requests()] == [approval, question]
    assert not any(r.answered for r in loop.pending_requests())  # a refusal records nothing
    await loop.aclose()


async def test_messages_sent_to_a_parked_turn_wait_in_its_checkpoint_under_their_ids() -> None:
    store = InMemorySessionStore()
    first = new_loop(store, [Reply(tool_calls=[("size", {})])])
    parked = await first.run_turn("go", session_id="s")
    steers = [first.inject_steering(t, "s") for t in ("steer 1", "steer 2")]
    later = first.inject_follow_up("later", "s")
    for r in (*steers, later):
        assert r and r.state is MessageState.QUEUED and r.turn_id == parked.turn_id
    cp = store.load_checkpoint("s")
    assert cp is not None
    assert (cp.steering, cp.steering_ids) == (("steer 1", "steer 2"),
                                              tuple(r.message_id for r in steers))
    assert (cp.follow_ups, cp.follow_up_ids) == (("later",), (later.message_id,))
    await first.aclose()

    second = new_loop(store, [Reply(text="done")])
    (asked,) = second.pending_requests("s")
    resumed = await second.answer(asked.request_id, "S")  # type: ignore[misc]
    assert resumed.follow_ups == ("later",) and resumed.follow_up_ids == (later.message_id,)
    users = [m.content for m in resumed.messages if m.role == "user"]
    assert users[-2:] == ["steer 1", "steer 2"]
    await second.aclose()


async def test_an_answer_given_in_time_is_replayed_when_the_call_reruns_after_a_park(
        tmp_path: Any) -> None:
    """Q1 is answered live (before ``park_after``), Q2 is not and parks the turn. Resumed
    from a file store by another loop, the call runs again: Q1's answer is replayed, not
    asked again, and the parked request reads back as it was written."""
    from steerable import Timeouts
    from steerable.storage import JSONLSessionStore
    from tests.conftest import wait_for

    @tool(read_only=True)
    async def survey(ctx: ToolContext) -> str:
        """Ask two questions."""
        name = await ctx.ask("Name?")
        return f"{name}/" + await ctx.ask("Size?", choices=["S", "M"])

    def loop_over(script: list[Any]) -> AgentLoop:
        agent = Agent(name="main", provider=ScriptedProvider(script), tools=[survey])
        return AgentLoop(agent, store=JSONLSessionStore(tmp_path), park=True,
                         timeouts=Timeouts(park_after=0.2))

    first = loop_over([Reply(tool_calls=[("survey", {})])])
    sub = first.subscribe([K.QUESTION_ASKED])
    handle = first.start_turn("go", session_id="s")
    q1 = await wait_for(sub, K.QUESTION_ASKED)
    assert first.answer(q1.request_id, "Ann") is True  # live: the turn has not parked yet
    parked = await handle
    assert parked.status is TurnStatus.WAITING
    (q2,) = parked.pending
    assert q2.question == "Size?" and q2.created > 0
    await first.aclose()

    second = loop_over([Reply(text="done")])
    (seen,) = second.pending_requests("s")
    assert (seen.request_id, seen.created, seen.choices, seen.question) == (
        q2.request_id, q2.created, ("S", "M"), "Size?")
    sub = second.subscribe([K.QUESTION_ASKED, K.QUESTION_ANSWERED])
    resumed = await second.answer(q2.request_id, "M")  # type: ignore[misc]
    assert resumed.status is TurnStatus.COMPLETED
    assert resumed.messages[-2].content == "Ann/M"
    events = sub.drain_nowait()
    assert of(events, K.QUESTION_ASKED) == []  # neither asked again
    assert [(e.request_id, e.value) for e in of(events, K.QUESTION_ANSWERED)] == [
        (q2.request_id, "M")]
    await second.aclose()


async def test_an_approval_given_in_time_is_replayed_when_its_call_reruns_after_a_park(
        tmp_path: Any) -> None:
    """The approval of a call is answered live; the call then asks a question that parks the
    turn. Resumed by another loop, the call runs again under the approval it got: the
    approver is not asked again and the call runs once."""
    from steerable import Timeouts
    from steerable.storage import JSONLSessionStore
    from tests.conftest import wait_for

    ran: list[str] = []

    @tool
    async def label(ctx: ToolContext) -> str:
        """Ask for a label and write it (so it needs an approval first)."""
        answer = await ctx.ask("Label?")
        ran.append(answer)
        return f"labelled {answer}"

    def loop_over(script: list[Any]) -> AgentLoop:
        agent = Agent(name="main", provider=ScriptedProvider(script), tools=[label])
        loop = AgentLoop(agent, store=JSONLSessionStore(tmp_path), park=True,
                         timeouts=Timeouts(park_after=0.2))
        loop.register_hook(HumanApprover())
        return loop

    first = loop_over([Reply(tool_calls=[("label", {})])])
    sub = first.subscribe([K.APPROVAL_REQUESTED, K.QUESTION_ASKED])
    handle = first.start_turn("go", session_id="s")
    approval = await wait_for(sub, K.APPROVAL_REQUESTED)
    assert first.resolve_approval(approval.request_id, True, "fine") is True  # live
    await wait_for(sub, K.QUESTION_ASKED)
    parked = await handle
    assert parked.status is TurnStatus.WAITING
    (question,) = parked.pending
    assert question.kind == "question"
    await first.aclose()

    second = loop_over([Reply(text="done")])
    sub = second.subscribe([K.APPROVAL_REQUESTED, K.APPROVAL_RESOLVED, K.QUESTION_ASKED])
    resumed = await second.answer(question.request_id, "blue")  # type: ignore[misc]
    assert resumed.status is TurnStatus.COMPLETED and ran == ["blue"]
    assert resumed.messages[-2].content == "labelled blue"
    events = sub.drain_nowait()
    assert of(events, K.APPROVAL_REQUESTED) == [] and of(events, K.QUESTION_ASKED) == []
    await second.aclose()


async def test_a_live_approval_is_listed_for_its_session_only() -> None:
    import asyncio

    from tests.conftest import wait_for

    loop = AgentLoop(Agent(name="main", provider=ScriptedProvider(
        [Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="done")]), tools=[write]))
    loop.register_hook(HumanApprover())
    sub = loop.subscribe([K.APPROVAL_REQUESTED])
    handle = loop.start_turn("go", session_id="s")
    asked = await wait_for(sub, K.APPROVAL_REQUESTED)
    (req,) = loop.pending_requests("s")
    assert (req.request_id, req.session_id, req.kind) == (asked.request_id, "s", "approval")
    assert loop.pending_requests("other") == []
    assert loop.resolve_approval(asked.request_id, False, "no") is True
    result = await asyncio.wait_for(handle, 5)
    assert result.status is TurnStatus.COMPLETED
    await loop.aclose()


async def test_a_store_that_cannot_index_a_parked_request_says_so_and_keeps_it() -> None:
    class NoIndex(InMemorySessionStore):
        def index_requests(self, session_id: str, request_ids: Any) -> None:
            raise OSError("index offline")

    store = NoIndex()
    loop = new_loop(store, [Reply(tool_calls=[("size", {})])])
    sub = loop.subscribe([K.ERROR])
    parked = await loop.run_turn("go", session_id="s")
    assert parked.status is TurnStatus.WAITING
    assert [(e.message, e.source, e.turn_id) for e in sub.drain_nowait()] == [
        ("indexing the waiting requests of session 's' failed: index offline", "checkpoint",
         parked.turn_id)]
    cp = store.load_checkpoint("s")
    assert cp is not None and [r.request_id for r in cp.waiting] == [
        r.request_id for r in parked.pending]  # the checkpoint still lists it
    await loop.aclose()
