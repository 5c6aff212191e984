"""Messages across Redis workers have ids and states (SPEC 10): a steer's receipt comes from the
worker whose turn took it, a posted message keeps its queue entry's id through the turn that
runs it, and a message withdrawn while the worker drains the queue runs never or once. A
follow-up a turn hands back runs as a new message linked by ``origin_id``; a message sent to
steer that the turn cannot take is queued under its own id, never rejected first."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from steerable import Agent, Reply, ScriptedProvider, tool
from steerable.scale import LeaseTiming, RedisClient, RedisWorker
from tests.scale._harness import ended, events_until


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[RedisClient]:
    made = RedisClient(redis_url, reply_timeout=2.0)
    yield made
    await made.aclose()


def gated(gate: asyncio.Event, turns: int) -> Agent:
    """The first turn waits in a tool for ``gate``; every other answers at once."""

    @tool
    async def work() -> str:
        """Wait for the gate."""
        await gate.wait()
        return "done"

    def echo(request) -> Reply:
        return Reply(text=f"re: {[m.content for m in request.messages if m.role == 'user'][-1]}")

    return Agent(name="g", provider=ScriptedProvider(
        [Reply(tool_calls=[("work", {})]), *[echo] * (turns + 1)]), tools=[work])


async def test_receipts_come_from_the_worker_whose_turn_took_the_message(
        redis_url: str, client: RedisClient) -> None:
    gate = asyncio.Event()
    worker = RedisWorker(gated(gate, 2), redis_url, lease=LeaseTiming(ttl=1.0))
    task = asyncio.get_running_loop().create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    try:
        refused = await client.steer("nobody listens", "r")
        assert not refused and refused.state == "rejected" and refused.message_id is None
        sent = await client.send("go", "r")
        assert sent.message_id and sent.state == "queued"
        await events_until(client, "r", lambda e: e["kind"] == "tool_exec_start")
        steer = await client.steer("and this", "r")
        assert steer and steer.state == "queued" and steer.message_id
        via_send = await client.send("also", "r")  # policy steer: the holder's receipt
        assert via_send.action == "steered" and via_send.message_id not in (None, sent.message_id)
        queued = await client.queue("r")
        assert [m["message_id"] for m in queued] == [steer.message_id, via_send.message_id]
        gate.set()
        events = await events_until(client, "r", ended())
        delivered = {e["message_id"] for e in events
                     if e["kind"] == "message_state" and e["state"] == "delivered"}
        # The posted message kept its id through the turn that ran it.
        assert {sent.message_id, steer.message_id, via_send.message_id} <= delivered
    finally:
        gate.set()
        worker.stop()
        await asyncio.wait_for(task, 20)


async def test_a_message_withdrawn_while_the_worker_drains_the_queue_runs_never_or_once(
        redis_url: str, client: RedisClient) -> None:
    count = 30
    gate = asyncio.Event()
    worker = RedisWorker(gated(gate, count), redis_url, lease=LeaseTiming(ttl=1.0))
    task = asyncio.get_running_loop().create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    rng = random.Random(29)
    try:
        await client.send("start", "d")
        await events_until(client, "d", lambda e: e["kind"] == "tool_exec_start")
        ids = {(await client.send(f"m{i}", "d", "follow_up")).message_id: f"m{i}"
               for i in range(count)}
        assert None not in ids

        async def withdraw(mid: str | None) -> tuple[str | None, bool]:
            await asyncio.sleep(rng.random() * 0.05)
            assert mid is not None
            return mid, await client.revoke(mid)

        order = list(ids)
        rng.shuffle(order)
        gate.set()  # the worker drains the queue while the revokes race it
        revoked = dict(await asyncio.gather(*(withdraw(m) for m in order[: count // 2])))
        while await client.holder("d") is not None or await client.queue("d"):
            await asyncio.sleep(0.05)
        # Each turn's input is in the history once: what ran, and how often.
        seen = Counter(m.content for m in worker.loop.session_messages("d")
                       if m.role == "user" and m.content in ids.values())
        for mid, text in ids.items():
            assert seen[text] == (0 if revoked.get(mid) else 1), (text, revoked.get(mid))
    finally:
        gate.set()
        worker.stop()
        await asyncio.wait_for(task, 20)


async def test_a_follow_up_its_turn_hands_back_runs_as_a_new_message_linked_to_it(
        redis_url: str, client: RedisClient) -> None:
    """SPEC 10: a follow-up the turn ended without delivering is ``returned``; the worker that
    runs it later gives it a new lifecycle as a new message whose ``origin_id`` is the old id."""
    gate = asyncio.Event()
    worker = RedisWorker(gated(gate, 2), redis_url, lease=LeaseTiming(ttl=1.0))
    task = asyncio.get_running_loop().create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    try:
        await client.send("go", "f")
        await events_until(client, "f", lambda e: e["kind"] == "tool_exec_start")
        later = await client.follow_up("and later", "f")
        assert later and later.message_id
        gate.set()
        events = await events_until(client, "f", ended(2))
        states = [(e["message_id"], e["state"], e.get("origin_id")) for e in events
                  if e["kind"] == "message_state" and e["text"] == "and later"]
        again = [mid for mid, state, origin in states
                 if state == "queued" and origin == later.message_id]
        assert len(again) == 1, states
        assert [s for mid, s, _ in states if mid == later.message_id] == ["queued", "returned"]
        assert [s for mid, s, _ in states if mid == again[0]] == ["queued", "delivered"]
    finally:
        gate.set()
        worker.stop()
        await asyncio.wait_for(task, 20)


async def test_a_steer_the_turn_cannot_take_is_queued_under_its_own_id_and_never_rejected(
        redis_url: str, client: RedisClient) -> None:
    """A message sent with policy ``steer`` to a turn whose steering queue is full runs as a
    turn of its own, as on one process: one lifecycle (queued, then delivered), no REJECTED."""
    from steerable import Limits

    gate = asyncio.Event()
    worker = RedisWorker(gated(gate, 3), redis_url, lease=LeaseTiming(ttl=1.0),
                         limits=Limits(steering_queue=1))
    task = asyncio.get_running_loop().create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    try:
        await client.send("go", "q")
        await events_until(client, "q", lambda e: e["kind"] == "tool_exec_start")
        taken = await client.send("steered in", "q")
        assert taken.action == "steered"
        overflow = await client.send("one too many", "q")
        assert overflow.action == "queued" and overflow.message_id
        gate.set()
        events = await events_until(client, "q", ended(2))
        states = [(e["message_id"], e["state"]) for e in events
                  if e["kind"] == "message_state" and e["text"] == "one too many"]
        assert states == [(overflow.message_id, "queued"), (overflow.message_id, "delivered")]
    finally:
        gate.set()
        worker.stop()
        await asyncio.wait_for(task, 20)
