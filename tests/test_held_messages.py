"""Messages ``send`` queues behind a turn live in the store: the turn's checkpoint holds them,
and between two turns the successor checkpoint does (``_durable.release`` / ``sync_held``)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    Checkpoint,
    InMemorySessionStore,
    Message,
    MessageReceipt,
    Reply,
    ScriptedProvider,
    tool,
)
from steerable._core._durable import successor, sync_held


class Saves(InMemorySessionStore):
    """Keeps every checkpoint written, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[Checkpoint] = []

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.saved.append(checkpoint)
        super().save_checkpoint(checkpoint)


def agent(script: list[Any]) -> Agent:
    @tool
    async def step() -> str:
        """A step."""
        await asyncio.sleep(0.01)
        return "done"

    return Agent(name="held", provider=ScriptedProvider(script), tools=[step])


async def test_a_turn_with_messages_behind_it_hands_its_checkpoint_on_to_them() -> None:
    store = Saves()
    loop = AgentLoop(agent([Reply(tool_calls=[("step", {})]), Reply(text="1"), Reply(text="2"),
                            Reply(text="3")]), store=store)
    loop.send("first", "s")
    second = loop.send("second", "s", "follow_up")
    third = loop.send("third", "s", "follow_up")
    held = [cp for cp in store.saved if cp.input == "first"][-1]
    assert held.held == ("second", "third")
    assert held.held_ids == (second.message_id, third.message_id)
    await loop.wait_session("s")
    handed = [cp for cp in store.saved if cp.input == "second" and cp.held == ("third",)]
    assert handed, "the first turn's checkpoint was not handed on"
    cp = handed[0]
    assert (cp.agent, cp.tools, cp.stage, cp.iteration, cp.base_count, cp.seq) == (
        "held", ("step",), "model", 0, None, 1)
    assert cp.input_id == second.message_id and cp.held_ids == (third.message_id,)
    assert list(cp.messages) == [Message("user", "second")]
    assert cp.turn_id == cp.origin_turn_id and cp.turn_id.startswith("turn_")
    assert store.load_checkpoint("s") is None  # all ran: nothing pending
    assert [m.content for m in loop.session_messages("s") if m.role == "user"] == [
        "first", "second", "third"]
    await loop.aclose()

    # What a process that died right then would resume: the second message's turn, with the
    # third handed back as its follow-up.
    again = InMemorySessionStore()
    again.save_checkpoint(cp)
    later = AgentLoop(agent([Reply(text="2")]), store=again)
    result = await later.resume("s")  # type: ignore[misc]
    assert result.text == "2" and result.follow_ups == ("third",)
    assert result.follow_up_ids == (third.message_id,)
    await later.aclose()


async def test_sync_held_keeps_the_store_in_step_with_what_a_lane_holds() -> None:
    store = InMemorySessionStore()
    loop = AgentLoop(agent([]), store=store)
    engine = loop._engine
    a = MessageReceipt("send", "a", "s")
    b = MessageReceipt("send", "b", "s")
    engine.waiting["s"] = [a, b]
    sync_held(engine, "s", loop.agent)  # no turn, no checkpoint: a successor holds them
    cp = store.load_checkpoint("s")
    assert cp is not None and (cp.input_id, cp.held_ids) == (a.message_id, (b.message_id,))
    assert cp.agent == "held" and engine.successors["s"] is loop.agent
    engine.waiting["s"] = [b]
    sync_held(engine, "s", loop.agent)
    cp = store.load_checkpoint("s")
    assert cp is not None and (cp.input_id, cp.held) == (b.message_id, ())
    engine.waiting["s"] = []
    sync_held(engine, "s", loop.agent)  # nothing held: the successor goes
    assert store.load_checkpoint("s") is None and "s" not in engine.successors
    sync_held(engine, "s", loop.agent)  # and nothing is written for nothing
    assert store.load_checkpoint("s") is None

    # A turn waiting for resume keeps what waits behind it, and lets it go.
    pending = dataclasses.replace(successor("s", loop.agent, [a]), created=1000.0, updated=1000.0)
    store.save_checkpoint(pending)
    engine.waiting["s"] = [b]
    sync_held(engine, "s", loop.agent)
    cp = store.load_checkpoint("s")
    assert cp is not None and cp.input_id == a.message_id and cp.held_ids == (b.message_id,)
    # (what `sessions` and the server show as the checkpoint's last change moves; its birth not)
    assert cp.created == 1000.0 and cp.updated > time.time() - 60
    assert "s" not in engine.successors
    engine.waiting["s"] = []
    sync_held(engine, "s", loop.agent)
    cp = store.load_checkpoint("s")
    assert cp is not None and cp.input_id == a.message_id and cp.held == ()
    await loop.aclose()


async def test_revoking_or_editing_a_held_message_rewrites_the_checkpoint() -> None:
    store = Saves()
    loop = AgentLoop(agent([Reply(tool_calls=[("step", {})]), Reply(text="1"), Reply(text="2")]),
                     store=store)
    loop.send("first", "s")
    gone = loop.send("second", "s", "follow_up")
    kept = loop.send("third", "s", "follow_up")
    assert loop.revoke_message(gone.message_id)
    cp = store.load_checkpoint("s")
    assert cp is not None and cp.input == "first" and cp.held_ids == (kept.message_id,)
    assert loop.edit_message(kept.message_id, "third!")
    cp = store.load_checkpoint("s")
    assert cp is not None and cp.held == ("third!",)
    await loop.wait_session("s")
    assert [m.content for m in loop.session_messages("s") if m.role == "user"] == [
        "first", "third!"]
    await loop.aclose()



async def test_messages_held_under_a_composite_root_stay_in_memory_as_its_turns_do() -> None:
    """A composite's turns keep no checkpoint (they stop at child boundaries), so what waits
    for one is held in memory like the turn itself: no successor checkpoint (which would name
    the composite as a model agent), no error. A message that names a model agent of its own
    gets the successor its turn will replace. Here the second session's messages wait for a
    turn slot, with no turn of theirs running (``sync_held`` with no turn)."""
    from steerable import EventKind, Limits, SequentialAgent

    gate = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait for the gate."""
        await gate.wait()
        return "done"

    store = Saves()
    child = Agent(name="child", provider=ScriptedProvider(
        [Reply(tool_calls=[("wait", {})]), Reply(text="a")]), tools=[wait])
    root = SequentialAgent(name="pipeline", agents=[child])
    # Two slots: the composite's turn and its child's; the second session waits for them.
    loop = AgentLoop(root, store=store, limits=Limits(active_turns=2))
    errors = loop.subscribe([EventKind.ERROR])
    started = loop.subscribe([EventKind.TOOL_EXEC_START])
    first = loop.send("a", "a")
    await anext(aiter(started))
    queued = [loop.send(text, "b", "follow_up") for text in ("b1", "b2", "b3")]
    assert store.saved == [] and store.load_checkpoint("b") is None
    assert loop.revoke_message(queued[1].message_id)
    assert loop.edit_message(queued[2].message_id, "b3!")
    assert store.saved == []
    own = loop.send("b4", "b", "follow_up", agent=agent([]))  # a model agent of its own
    for q in (queued[0], queued[2]):
        assert loop.revoke_message(q.message_id)
    cp = store.load_checkpoint("b")  # b4 is first now: its turn will be durable
    assert cp is not None and cp.agent == "held" and cp.input_id == own.message_id
    assert loop.revoke_message(own.message_id)
    assert store.load_checkpoint("b") is None
    gate.set()
    assert (await first).text == "a"
    assert [getattr(e, "message", e) for e in errors.drain_nowait()] == []
    assert store.load_checkpoint("a") is None and store.load_checkpoint("b") is None
    await loop.aclose()


async def test_messages_held_behind_a_composite_root_run_in_order_and_leave_no_checkpoint(
) -> None:
    """A composite's turns keep no checkpoint (they stop at child boundaries), so what waits
    behind one is held in memory like the turn itself: no successor checkpoint (which would
    name the composite as a model agent, and make the session's next turn refuse to start
    over a checkpoint no turn of it replaces), no error, every message run once, in order."""
    from steerable import EventKind, SequentialAgent

    store = Saves()
    root = SequentialAgent(name="pipeline", agents=[
        agent([Reply(tool_calls=[("step", {})]), Reply(text="1"), Reply(text="2"),
               Reply(text="3"), Reply(text="4")])])
    loop = AgentLoop(root, store=store)
    errors = loop.subscribe([EventKind.ERROR])
    loop.send("first", "s")
    gone = loop.send("second", "s", "follow_up")
    loop.send("third", "s", "follow_up")
    assert loop.revoke_message(gone.message_id)
    await loop.wait_session("s")
    loop.send("fourth", "s", "follow_up")  # between turns too
    await loop.wait_session("s")
    assert [getattr(e, "message", e) for e in errors.drain_nowait()] == []
    assert store.saved == [] and store.load_checkpoint("s") is None
    assert [m.content for m in loop.session_messages("s") if m.role == "user"] == [
        "first", "third", "fourth"]
    await loop.aclose()
