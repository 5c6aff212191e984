"""A store that fails to write a checkpoint: the turn and its messages go on in memory, and
each failure is one ERROR (source ``checkpoint``) that says which write failed and what is
held in memory only, on the turn it concerns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    Checkpoint,
    EventKind,
    InMemorySessionStore,
    Limits,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from tests.conftest import of, wait_for

K = EventKind


class Flaky(InMemorySessionStore):
    """Fails the checkpoint writes (and deletes) its predicates pick."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_save: Callable[[Checkpoint], bool] = lambda cp: False
        self.fail_delete = False

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        if self.fail_save(checkpoint):
            raise OSError("disk full")
        super().save_checkpoint(checkpoint)

    def delete_checkpoint(self, session_id: str) -> None:
        if self.fail_delete:
            raise OSError("read-only")
        super().delete_checkpoint(session_id)


def gated(script: list[Any], store: Flaky, **loop_kw: Any) -> tuple[AgentLoop, asyncio.Event]:
    gate = asyncio.Event()

    @tool
    async def act(name: str, ctx: ToolContext) -> str:
        """Do something."""
        await gate.wait()
        return f"did {name}"

    agent = Agent(name="a", provider=ScriptedProvider(script), tools=[act])
    return AgentLoop(agent, store=store, **loop_kw), gate


def errors(events: list[Any]) -> list[tuple[str, str, str, str]]:
    return [(e.message, e.source, e.turn_id, e.session_id) for e in of(events, K.ERROR)]


CALL = Reply(tool_calls=[("act", {"name": "x"})])


async def test_every_write_of_a_turn_failing_leaves_the_turn_running_in_memory() -> None:
    store = Flaky()
    store.fail_save = lambda cp: True
    loop, gate = gated([CALL, Reply(text="done")], store)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    steer = loop.inject_steering("steer me", "s")
    assert steer  # accepted all the same: held in memory
    gate.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED and result.text == "done"
    t = result.turn_id
    write = "writing the checkpoint of session 's' failed: OSError: disk full; "
    got = set(errors(sub.drain_nowait()))
    assert got == {(write + "the turn goes on without it", "checkpoint", t, "s"),
                   (write + "the message is held in memory only", "checkpoint", t, "s")}
    await loop.aclose()


async def test_a_turn_that_cannot_hand_its_checkpoint_on_says_so_and_loses_nothing() -> None:
    """The successor's write fails: the store still holds the ended turn's checkpoint, which
    must not refuse the held message as "a pending turn"; it runs, from memory."""
    store = Flaky()
    loop, gate = gated([CALL, Reply(text="1"), Reply(text="2")], store)
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    second = loop.send("second", "s", "follow_up")
    store.fail_save = lambda cp: cp.input == "second" and cp.iteration == 0  # the successor
    gate.set()
    result = await first  # type: ignore[misc]
    assert (await second).text == "2"  # type: ignore[misc]  (it ran from memory)
    got = [g for g in errors(sub.drain_nowait()) if g[2] == result.turn_id]
    assert got == [
        ("writing the checkpoint of session 's' failed: disk full; the messages queued "
         "behind the turn are held in memory only", "checkpoint", result.turn_id, "s")]
    await loop.aclose()


async def test_a_turn_whose_checkpoint_cannot_be_deleted_says_the_next_will_ask() -> None:
    store = Flaky()
    store.fail_delete = True
    loop, gate = gated([Reply(text="done")], store)
    sub = loop.subscribe()
    result = await loop.run_turn("go", session_id="s")
    assert errors(sub.drain_nowait()) == [
        ("deleting the checkpoint of session 's' failed: read-only; the next turn will ask "
         "to discard it", "checkpoint", result.turn_id, "s")]
    await loop.aclose()


async def test_messages_waiting_for_a_slot_that_cannot_be_written_are_held_in_memory() -> None:
    store = Flaky()
    loop, gate = gated([CALL, Reply(text="a"), Reply(text="b")], store,
                       limits=Limits(active_turns=1))
    sub = loop.subscribe()
    first = loop.start_turn("for a", session_id="a")
    await wait_for(sub, K.TOOL_EXEC_START)
    store.fail_save = lambda cp: cp.session_id == "b"
    waiting = loop.send("for b", "b")
    # (no turn runs for b: the error names none)
    assert [(e.message, e.source, e.turn_id, e.session_id)
            for e in of(sub.drain_nowait(), K.ERROR)] == [
        ("writing the checkpoint of session 'b' failed: disk full; the queued messages are "
         "held in memory only", "checkpoint", "", "")]
    gate.set()
    await first
    assert (await waiting).text == "b"  # type: ignore[misc]
    await loop.aclose()
