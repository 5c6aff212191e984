"""What the store holds of a running turn's messages, write by write: every message taken in,
revoked or edited is a new, newer checkpoint before the call returns (also through a store
written from threads, which drops a write older than the one it holds), steering drained into
the context survives a crash and is delivered once by the resumed turn, and messages waiting
for a slot live in a successor checkpoint."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    Checkpoint,
    EventKind,
    InMemorySessionStore,
    Limits,
    LLMRequest,
    MessageState,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from tests.conftest import of, wait_for

K = EventKind


class ThreadStore(InMemorySessionStore):
    """An in-memory store the loop writes from worker threads, as it does a SQLite or Redis
    one (``checkpoint_blocking``)."""

    checkpoint_blocking = True


def gated_agent(script: list[Any], gate: asyncio.Event) -> Agent:
    @tool
    async def act(name: str, ctx: ToolContext) -> str:
        """Do something."""
        await gate.wait()
        return f"did {name}"

    return Agent(name="a", provider=ScriptedProvider(script), tools=[act])


def calls(name: str) -> Reply:
    return Reply(tool_calls=[("act", {"name": name})])


@pytest.mark.parametrize("store_cls", [InMemorySessionStore, ThreadStore])
async def test_every_message_change_is_a_newer_checkpoint_before_the_call_returns(
        store_cls: type[InMemorySessionStore]) -> None:
    store = store_cls()
    gate = asyncio.Event()
    loop = AgentLoop(gated_agent([calls("x"), Reply(text="done")], gate), store=store)
    sub = loop.subscribe()
    handle = loop.start_turn("the task", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)

    def now() -> Checkpoint:
        cp = store.load_checkpoint("s")
        assert cp is not None
        return cp

    seqs = [now().seq]
    steer = loop.inject_steering("steer me", "s")
    cp = now()
    assert (cp.steering, cp.steering_ids) == (("steer me",), (steer.message_id,))
    seqs.append(cp.seq)
    later = loop.inject_follow_up("then this", "s")
    cp = now()
    assert (cp.follow_ups, cp.follow_up_ids) == (("then this",), (later.message_id,))
    seqs.append(cp.seq)
    assert loop.edit_message(later.message_id, "then that")
    assert now().follow_ups == ("then that",)
    seqs.append(now().seq)
    assert loop.revoke_message(steer.message_id)
    cp = now()
    assert (cp.steering, cp.steering_ids) == ((), ())
    seqs.append(cp.seq)
    assert seqs == list(range(seqs[0], seqs[0] + 5))  # one write each, each the newest
    gate.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED and result.follow_ups == ("then that",)
    assert store.load_checkpoint("s") is None
    await loop.aclose()


async def test_a_turns_checkpoints_count_from_one_with_its_first() -> None:
    store = InMemorySessionStore()
    gate = asyncio.Event()
    loop = AgentLoop(gated_agent([calls("x"), Reply(text="done")], gate), store=store)
    sub = loop.subscribe()
    handle = loop.start_turn("the task", session_id="s")
    first = store.load_checkpoint("s")  # written before start_turn returned
    assert first is not None
    assert (first.seq, first.checkpoint_id) == (1, f"{handle.turn_id}.1")
    await wait_for(sub, K.TOOL_EXEC_START)
    now = store.load_checkpoint("s")
    # 2 once it read its session (base_count known), 3 once the model asked for the tool
    assert now is not None and (now.seq, now.stage) == (3, "tools")
    gate.set()
    await handle
    await loop.aclose()


async def test_steering_taken_into_the_context_survives_a_crash_and_is_delivered_once() -> None:
    """The checkpoint written before the request that carries the steer holds it as injected
    and carried; a process that resumes it delivers it with its own first request."""
    store = InMemorySessionStore()
    gate = asyncio.Event()
    never = asyncio.Event()

    async def hang(request: LLMRequest) -> Reply:
        await never.wait()
        return Reply(text="unreachable")

    loop = AgentLoop(gated_agent([calls("x"), hang], gate), store=store)
    sub = loop.subscribe()
    handle = loop.start_turn("the task", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    steer = loop.inject_steering("steer me", "s")
    gate.set()
    await wait_for(sub, K.LLM_REQUEST)
    cp = store.load_checkpoint("s")
    assert cp is not None and cp.iteration == 1
    assert (cp.injected_steering, cp.injected_ids) == (("steer me",), (steer.message_id,))
    assert cp.carrying == (steer.message_id,) and cp.steering == ()

    # The process dies here: what a new one finds is the store as it is now.
    crashed = InMemorySessionStore()
    crashed.save_checkpoint(cp)
    loop.interrupt_hard("s")
    await handle
    await loop.aclose()

    provider = ScriptedProvider([Reply(text="finished")])
    again = AgentLoop(Agent(name="a", provider=provider, tools=loop.agent.tools),  # type: ignore[attr-defined]
                      store=crashed)
    sub2 = again.subscribe()
    result = await again.resume("s")  # type: ignore[misc]
    assert result.status is TurnStatus.COMPLETED and result.text == "finished"
    users = [m.content for m in provider.requests[0].messages if m.role == "user"]
    assert users == ["the task", "steer me"]
    events = sub2.drain_nowait()
    (request,) = of(events, K.LLM_REQUEST)
    fates = [(e.message_id, e.state, e.message_kind, e.request_seq)
             for e in of(events, K.MESSAGE_STATE)]
    assert fates == [(steer.message_id, MessageState.DELIVERED, "steer", request.seq)]
    await again.aclose()


async def test_messages_waiting_for_a_slot_live_in_a_successor_checkpoint() -> None:
    """Session b is idle but the one slot is taken: its messages wait, in the store, and even
    the policy 'reject' queues them (the session itself is not busy)."""
    store = InMemorySessionStore()
    gate = asyncio.Event()
    loop = AgentLoop(gated_agent([calls("x"), Reply(text="a done"), Reply(text="b done"),
                                  Reply(text="b again")], gate),
                     store=store, limits=Limits(active_turns=1))
    sub = loop.subscribe()
    first = loop.start_turn("for a", session_id="a")
    await wait_for(sub, K.TOOL_EXEC_START)
    before = time.time()
    waiting = loop.send("for b", "b", "reject")
    assert waiting.state is MessageState.QUEUED
    cp = store.load_checkpoint("b")
    assert cp is not None
    assert (cp.input, cp.input_id, cp.held, cp.stage, cp.iteration, cp.base_count) == (
        "for b", waiting.message_id, (), "model", 0, None)
    assert isinstance(cp.created, float) and before <= cp.created <= cp.updated <= time.time()
    also = loop.send("again b", "b", "follow_up")
    cp = store.load_checkpoint("b")
    assert cp is not None and (cp.held, cp.held_ids) == (("again b",), (also.message_id,))
    assert loop.edit_message(also.message_id, "b, edited")
    cp = store.load_checkpoint("b")
    assert cp is not None and cp.held == ("b, edited",)
    gate.set()
    assert (await first).status is TurnStatus.COMPLETED
    assert (await waiting).text == "b done"  # type: ignore[misc]
    assert (await also).text == "b again"  # type: ignore[misc]
    assert store.load_checkpoint("b") is None
    await loop.aclose()


async def test_a_threaded_store_hands_the_checkpoint_on_to_the_messages_behind_a_turn() -> None:
    """As a turn ends with messages queued behind it, a store written from threads gets the
    successor's checkpoint (written off the loop, without an error) before the next starts."""

    class Saves(ThreadStore):
        def __init__(self) -> None:
            super().__init__()
            self.inputs: list[tuple[str, tuple[str, ...]]] = []

        def save_checkpoint(self, checkpoint: Checkpoint) -> None:
            self.inputs.append((checkpoint.input, checkpoint.held))
            super().save_checkpoint(checkpoint)

    store = Saves()
    gate = asyncio.Event()
    loop = AgentLoop(gated_agent([calls("x"), Reply(text="1"), Reply(text="2"),
                                  Reply(text="3")], gate), store=store)
    sub = loop.subscribe()
    first = loop.send("first", "s")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.send("second", "s", "follow_up")
    loop.send("third", "s", "follow_up")
    gate.set()
    await first  # type: ignore[misc]
    await loop.wait_session("s")
    assert ("second", ("third",)) in store.inputs  # the successor, handed on
    assert of(sub.drain_nowait(), K.ERROR) == []
    assert store.load_checkpoint("s") is None
    await loop.aclose()
