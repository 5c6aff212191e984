"""A turn resumed more than once stays one turn: its origin, its creation time and its input
carry over every resume, and each resumed run is a new turn id."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from steerable import CancelMode, EventKind, InMemorySessionStore, Message, Reply, TurnStatus
from steerable.errors import CheckpointError, SessionBusyError
from steerable.storage import JSONLSessionStore
from tests.conftest import wait_for
from tests.test_resume import Tools, calls, make

K = EventKind


async def test_a_turn_cancelled_twice_keeps_its_origin_across_both_resumes() -> None:
    store = InMemorySessionStore()
    tools = Tools()
    gates = [tools.gates.setdefault(n, asyncio.Event()) for n in ("a1", "a2")]

    first, _ = make(store, [calls(("act", "a1"))], tools)
    sub = first.subscribe()
    handle = first.start_turn("the task", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    first.cancel("s", mode=CancelMode.AFTER_MODEL)
    gates[0].set()
    origin = await handle
    assert origin.status is TurnStatus.CANCELLED
    cp1 = first.checkpoint("s")
    assert cp1 is not None and (cp1.turn_id, cp1.origin_turn_id) == (origin.turn_id,
                                                                     origin.turn_id)
    await first.aclose()

    second, _ = make(store, [calls(("act", "a2"))], tools)
    sub2 = second.subscribe()
    again = second.resume("s")
    assert again is not None
    start = await wait_for(sub2, K.TURN_START)
    assert start.input == "the task" and start.turn_id.startswith("turn_")
    assert start.turn_id not in (origin.turn_id, "")
    await wait_for(sub2, K.TOOL_EXEC_START)
    with pytest.raises(SessionBusyError):
        second.resume("s")  # the session's turn is running
    second.cancel("s", mode=CancelMode.AFTER_MODEL)
    gates[1].set()
    middle = await again
    assert middle.status is TurnStatus.CANCELLED
    cp2 = second.checkpoint("s")
    assert cp2 is not None
    assert (cp2.turn_id, cp2.origin_turn_id, cp2.created, cp2.input) == (
        middle.turn_id, origin.turn_id, cp1.created, "the task")
    assert cp2.checkpoint_id.startswith(origin.turn_id + ".") and cp2.seq > cp1.seq
    await second.aclose()

    third, provider = make(store, [Reply(text="finished")], tools)
    last = await third.resume("s")  # type: ignore[misc]
    assert last.status is TurnStatus.COMPLETED and last.resumed_from == middle.turn_id
    assert [m.content for m in provider.requests[0].messages if m.role == "user"] == ["the task"]
    assert tools.names() == ["a1", "a2"]


async def test_resume_refuses_what_is_not_an_agent() -> None:
    loop, _ = make(InMemorySessionStore(), [], Tools())
    with pytest.raises(TypeError, match="agent must be an agent, got int"):
        loop.resume("s", agent=5)  # type: ignore[arg-type]
    assert loop.resume("s") is None  # nothing pending


async def cancelled_session(store: InMemorySessionStore) -> None:
    tools = Tools()
    gate = tools.gates.setdefault("a1", asyncio.Event())
    loop, _ = make(store, [calls(("act", "a1"))], tools)
    store.append("s", [Message("user", "earlier"), Message("assistant", "ok")], None)
    sub = loop.subscribe()
    handle = loop.start_turn("the task", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    await handle
    await loop.aclose()


async def test_a_checkpoint_whose_turn_the_session_already_holds_is_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    store = InMemorySessionStore()
    await cancelled_session(store)
    cp = store.load_checkpoint("s")
    assert cp is not None
    store.append("s", list(cp.messages), None)  # saved, then the process died
    loop, _ = make(store, [], Tools())
    with caplog.at_level(logging.WARNING, logger="steerable"):
        assert loop.resume("s") is None
    assert store.load_checkpoint("s") is None
    (record,) = [r for r in caplog.records if "already holds" in r.getMessage()]
    assert record.getMessage() == (
        f"session s already holds the turn of checkpoint {cp.checkpoint_id} (its process "
        "stopped between saving the turn and deleting the checkpoint); dropping the checkpoint")


async def test_a_session_that_changed_under_its_checkpoint_is_refused() -> None:
    store = InMemorySessionStore()
    await cancelled_session(store)
    store.append("s", [Message("user", "someone else"), Message("assistant", "hm")], None)
    loop, _ = make(store, [], Tools())
    with pytest.raises(CheckpointError, match=r"session 's' changed since its checkpoint was "
                       r"written \(it has 4 messages, the checkpoint expects 2\)"):
        loop.resume("s")
    assert store.load_checkpoint("s") is not None  # nothing lost: the user decides


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])  # appended on the loop / written in a thread
async def test_a_file_store_holds_the_checkpoint_of_a_running_tool_and_no_write_fails(
        tmp_path: Path, kind: str) -> None:
    from steerable.storage import SQLiteSessionStore

    store: Any = (JSONLSessionStore(tmp_path) if kind == "jsonl"
                  else SQLiteSessionStore(str(tmp_path / "s.sqlite")))
    tools = Tools()
    gate = tools.gates.setdefault("a1", asyncio.Event())
    loop, _ = make(store, [calls(("act", "a1"), ("look", "b")), Reply(text="done")], tools)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("the task", session_id="s")
    start = await wait_for(sub, K.TOOL_EXEC_START)
    cp = loop.checkpoint("s")
    assert cp is not None and (cp.turn_id, cp.stage, cp.iteration) == (start.turn_id, "tools", 1)
    assert [c.name for m in cp.messages for c in m.tool_calls] == ["act", "look"]
    gate.set()
    assert (await handle).status is TurnStatus.COMPLETED
    assert loop.checkpoint("s") is None
    assert not [e for e in sub.drain_nowait() if e.kind is K.ERROR]
    await loop.aclose()


async def test_resuming_with_another_agent_says_exactly_what_differs() -> None:
    from steerable import Agent, ScriptedProvider

    store = InMemorySessionStore()
    await cancelled_session(store)
    loop, _ = make(store, [], Tools())
    stranger = Agent(name="b", provider=ScriptedProvider([]))
    with pytest.raises(CheckpointError) as caught:
        loop.resume("s", agent=stranger)
    assert str(caught.value) == (
        "the checkpoint of session 's' was written by agent 'a' with tools ['act', 'look']; "
        "this agent is 'b' with tools []. Resume with the same agent, pass force=True to go "
        "on anyway (calls to a missing tool get an error result), or start a new turn with "
        "discard_checkpoint=True")


async def test_a_checkpoint_after_the_tools_holds_what_ran_and_their_results() -> None:
    store = InMemorySessionStore()
    tools = Tools()
    gate = asyncio.Event()

    async def thinking(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="done")

    loop, _ = make(store, [calls(("act", "a1"), ("look", "b1")), thinking], tools)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("the task", session_id="s")
    first = loop.checkpoint("s")
    assert first is not None and first.stage == "model" and first.tools_run == ()
    await wait_for(sub, K.TOOL_EXEC_END)
    await wait_for(sub, K.TOOL_EXEC_END)
    await wait_for(sub, K.LLM_REQUEST)
    now = loop.checkpoint("s")
    assert now is not None
    assert (now.stage, now.iteration, tuple(now.tools_run)) == ("tools", 1, ("act", "look"))
    assert sorted(m.content for m in now.results) == ["did a1", "saw b1"]
    assert now.seq > first.seq and now.checkpoint_id.startswith(first.checkpoint_id.split(".")[0])
    gate.set()
    assert (await handle).status is TurnStatus.COMPLETED


async def test_start_turn_refuses_an_empty_session_id() -> None:
    loop, _ = make(InMemorySessionStore(), [], Tools())
    with pytest.raises(ValueError, match="session_id must be a non-empty str"):
        loop.start_turn("go", session_id="")


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
async def test_a_turn_resumed_stopped_and_resumed_again_on_a_session_with_earlier_turns(
        tmp_path: Path, kind: str) -> None:
    """The resume chain on a session that already had turns: killed before it read the
    session (its first checkpoint knows no base), resumed, cancelled, resumed a second time.
    Each resume must count the earlier turns as the base, never the empty session."""
    earlier = [Message("user", "earlier"), Message("assistant", "ok")]
    store: Any = InMemorySessionStore() if kind == "memory" else JSONLSessionStore(tmp_path)
    store.append("s", earlier, None)
    tools = Tools()
    gate = tools.gates.setdefault("a1", asyncio.Event())

    # A process that died as the turn started: only its first checkpoint is in the store.
    doomed, _ = make(InMemorySessionStore(), [], tools)
    doomed.store.append("s", earlier, None)
    doomed.start_turn("the task", session_id="s")
    first = doomed.checkpoint("s")
    assert first is not None and first.base_count is None
    doomed.interrupt_hard("s")
    await doomed.aclose()
    store.save_checkpoint(first)

    second, _ = make(store, [calls(("act", "a1"))], tools)
    sub = second.subscribe()
    again = second.resume("s")
    assert again is not None
    await wait_for(sub, K.TOOL_EXEC_START)
    steer = second.inject_steering("and mind the docs", "s")
    second.cancel("s", mode=CancelMode.AFTER_TOOLS)
    gate.set()
    middle = await again
    assert middle.status is TurnStatus.CANCELLED
    cp = second.checkpoint("s")
    assert cp is not None and cp.base_count == 2 and cp.steering_ids == (steer.message_id,)
    await second.aclose()

    third, provider = make(store, [Reply(text="finished")], tools)
    last = await third.resume("s")  # type: ignore[misc]
    assert last.status is TurnStatus.COMPLETED and last.resumed_from == middle.turn_id
    sent = [m.content for m in provider.requests[0].messages if m.role == "user"]
    assert sent == ["earlier", "the task", "and mind the docs"]
    history = third.session_messages("s")
    assert history[:2] == earlier
    assert [m.content for m in history if m.role == "user"] == sent
    assert history[-1].content == "finished" and third.checkpoint("s") is None
    assert tools.names() == ["a1"]
    await third.aclose()
