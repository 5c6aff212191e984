"""The resume chain on a session that already had turns: a turn cancelled, resumed, cancelled
again and resumed a second time adds itself once, after the earlier turns, whatever the
store; the earlier history is never replayed, lost or counted twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from steerable import CancelMode, EventKind, InMemorySessionStore, Message, Reply, TurnStatus
from steerable.storage import JSONLSessionStore
from tests.conftest import assert_history_consistent, wait_for
from tests.test_resume import Tools, calls, make

K = EventKind
EARLIER = [Message("user", "earlier"), Message("assistant", "ok"),
           Message("user", "and then"), Message("assistant", "fine")]


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return InMemorySessionStore() if request.param == "memory" else JSONLSessionStore(tmp_path)


async def _cancel_in_tool(loop: Any, start: Any, gate: asyncio.Event) -> Any:
    sub = loop.subscribe()
    handle = start()
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    await loop.aclose()
    return result


async def test_a_turn_resumed_twice_on_a_session_with_earlier_turns(store: Any) -> None:
    store.append("s", list(EARLIER), None)
    tools = Tools()
    gates = [tools.gates.setdefault(n, asyncio.Event()) for n in ("a1", "a2")]

    first, _ = make(store, [calls(("act", "a1"))], tools)
    origin = await _cancel_in_tool(first, lambda: first.start_turn("the task", session_id="s"),
                                   gates[0])
    cp1 = store.load_checkpoint("s")
    assert cp1 is not None and cp1.base_count == len(EARLIER)

    second, p2 = make(store, [calls(("act", "a2"))], tools)
    middle = await _cancel_in_tool(second, lambda: second.resume("s"), gates[1])
    cp2 = store.load_checkpoint("s")
    assert cp2 is not None and cp2.base_count == len(EARLIER)
    assert (cp2.origin_turn_id, cp2.input) == (origin.turn_id, "the task")
    assert cp2.seq > cp1.seq
    # The resumed model call saw the earlier turns once, then the turn's own messages.
    sent = [m.content for m in p2.requests[0].messages if m.role == "user"]
    assert sent == ["earlier", "and then", "the task"]

    third, p3 = make(store, [Reply(text="finished")], tools)
    last = await third.resume("s")  # type: ignore[misc]
    assert last.status is TurnStatus.COMPLETED and last.resumed_from == middle.turn_id
    assert [m.content for m in p3.requests[0].messages if m.role == "user"] == [
        "earlier", "and then", "the task"]
    history = store.load("s")
    assert history[:len(EARLIER)] == EARLIER
    new = history[len(EARLIER):]
    assert [m.role for m in new] == ["user", "assistant", "tool", "assistant", "tool",
                                     "assistant"]
    assert [m.content for m in new if m.role == "user"] == ["the task"]
    assert new[-1].content == "finished"
    assert_history_consistent(history)
    assert store.load_checkpoint("s") is None
    assert tools.names() == ["a1", "a2"]
    await third.aclose()


async def test_a_later_turn_after_a_twice_resumed_one_sees_the_whole_history(
        store: Any) -> None:
    """The next turn starts on the history the chain left: earlier turns, the resumed turn
    once, then its own input."""
    store.append("s", list(EARLIER), None)
    tools = Tools()
    gates = [tools.gates.setdefault(n, asyncio.Event()) for n in ("a1", "a2")]
    first, _ = make(store, [calls(("act", "a1"))], tools)
    await _cancel_in_tool(first, lambda: first.start_turn("the task", session_id="s"), gates[0])
    second, _ = make(store, [calls(("act", "a2"))], tools)
    await _cancel_in_tool(second, lambda: second.resume("s"), gates[1])
    third, p3 = make(store, [Reply(text="finished"), Reply(text="next done")], tools)
    assert (await third.resume("s")).status is TurnStatus.COMPLETED  # type: ignore[union-attr]
    after = await third.start_turn("next", session_id="s")
    assert after.status is TurnStatus.COMPLETED
    users = [m.content for m in p3.requests[1].messages if m.role == "user"]
    assert users == ["earlier", "and then", "the task", "next"]
    assert len(store.load("s")) == len(EARLIER) + 6 + 2
    await third.aclose()


async def test_a_checkpoint_without_messages_over_a_changed_session_is_refused_clearly() -> None:
    """A checkpoint that holds no message (written by hand, or by an older version) over a
    session that no longer has the length it expects: a clear CheckpointError, nothing
    dropped."""
    from steerable import Checkpoint
    from steerable.errors import CheckpointError

    store = InMemorySessionStore()
    store.append("s", list(EARLIER), None)
    store.save_checkpoint(Checkpoint(
        session_id="s", turn_id="turn_x", origin_turn_id="turn_x", agent="a",
        tools=("act", "look"), input="the task", stage="model", iteration=1, messages=(),
        base_count=2))
    loop, _ = make(store, [], Tools())
    with pytest.raises(CheckpointError) as refused:
        loop.resume("s")
    assert str(refused.value) == (
        "session 's' changed since its checkpoint was written (it has 4 messages, the "
        "checkpoint expects 2); the pending turn cannot continue on top of it: start a new "
        "turn with discard_checkpoint=True")
    assert store.load_checkpoint("s") is not None
    await loop.aclose()


async def test_a_turn_killed_before_it_read_the_session_then_resumed_twice() -> None:
    """The chain from a turn's first checkpoint (written before it read the session: no base
    count): resumed, cancelled, resumed again, on a session with earlier turns."""
    store = InMemorySessionStore()
    store.append("s", list(EARLIER), None)
    tools = Tools()
    gate = tools.gates.setdefault("a1", asyncio.Event())
    first, _ = make(store, [], tools)
    handle = first.start_turn("the task", session_id="s")
    cp0 = store.load_checkpoint("s")
    assert cp0 is not None and cp0.base_count is None and cp0.iteration == 0
    crashed = InMemorySessionStore()  # what a process that died right now leaves
    crashed.append("s", list(EARLIER), None)
    crashed.save_checkpoint(cp0)
    first.interrupt_hard("s")
    await handle
    await first.aclose()

    second, p2 = make(crashed, [calls(("act", "a1"))], tools)
    await _cancel_in_tool(second, lambda: second.resume("s"), gate)
    assert [m.content for m in p2.requests[0].messages if m.role == "user"] == [
        "earlier", "and then", "the task"]
    cp1 = crashed.load_checkpoint("s")
    assert cp1 is not None and cp1.base_count == len(EARLIER)
    assert (cp1.origin_turn_id, cp1.input_id) == (cp0.turn_id, cp0.input_id)

    third, p3 = make(crashed, [Reply(text="finished")], tools)
    last = await third.resume("s")  # type: ignore[misc]
    assert last.status is TurnStatus.COMPLETED
    assert [m.content for m in p3.requests[0].messages if m.role == "user"] == [
        "earlier", "and then", "the task"]
    history = crashed.load("s")
    assert history[:len(EARLIER)] == EARLIER and len(history) == len(EARLIER) + 4
    assert_history_consistent(history)
    await third.aclose()


async def test_a_checkpoint_from_before_message_ids_resumes_with_new_ids() -> None:
    """An older checkpoint holds steering it delivered, and queued messages, without their
    ids: the resumed turn takes them in under new ids, nothing refused or lost."""
    from steerable import Checkpoint, Message

    store = InMemorySessionStore()
    store.save_checkpoint(Checkpoint(
        session_id="s", turn_id="turn_old", origin_turn_id="turn_old", agent="a",
        tools=("act", "look"), input="the task", stage="model", iteration=1,
        messages=(Message("user", "the task"), Message("assistant", "thinking"),
                  Message("user", "old steer")),
        injected_steering=("old steer",), steering=("queued steer",),
        follow_ups=("queued later",), base_count=0))
    loop, provider = make(store, [Reply(text="done")], Tools())
    result = await loop.resume("s")  # type: ignore[misc]
    assert result.status is TurnStatus.COMPLETED and result.follow_ups == ("queued later",)
    assert result.follow_up_ids and all(result.follow_up_ids)
    users = [m.content for m in provider.requests[0].messages if m.role == "user"]
    assert users == ["the task", "old steer", "queued steer"]
    await loop.aclose()
