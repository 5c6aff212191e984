"""Parked turns across Redis workers (real processes, a real redis-server): a turn parked on
one worker is answered through any process, after its worker died too, and runs its call
once on whichever worker takes the session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from steerable.errors import RequestClosedError
from steerable.scale import RedisClient
from tests.scale._harness import Workers, ended, events_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[RedisClient]:
    made = RedisClient(redis_url, reply_timeout=5.0)
    yield made
    await made.aclose()


@pytest.fixture
def parking(redis_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Workers whose every ``work`` call asks a person, and park the turn at once."""
    made = Workers(redis_url, tmp_path, ttl=1.0)
    made.env.update(TEST_ASK="1", TEST_PARK="1")
    yield made
    made.stop_all()


async def _parked(client: RedisClient, session_id: str) -> str:
    events = await events_until(client, session_id, ended())
    assert events[-1]["status"] == "waiting"
    return next(str(e["request_id"]) for e in events if e["kind"] == "approval_requested")


async def test_a_parked_turn_answered_through_any_process_runs_its_call_once(
        parking: Workers, client: RedisClient) -> None:
    parking.start("a", "b")
    await client.send("tool:0:alice", "alice")
    rid = await _parked(client, "alice")
    assert parking.ledger_lines() == []  # nothing ran: the call waits, no worker holds it
    last = None
    async for item in client.events("alice", None, block=0.1):
        last = item.id
        if item.data["kind"] == "turn_end":
            break
    assert await client.resolve_approval(rid, True)
    events = await events_until(client, "alice", ended(), last_id=last)
    assert events[0]["kind"] == "turn_start" and events[0]["resumed_from"]
    assert [e["approved"] for e in events if e["kind"] == "approval_resolved"] == [True]
    assert events[-1]["status"] == "completed" and events[-1]["text"] == "done alice"
    assert [line[1:3] for line in parking.ledger_lines()] == [["start", "alice"],
                                                              ["end", "alice"]]
    with pytest.raises(RequestClosedError):
        await client.resolve_approval(rid, False)


async def test_a_turn_parked_on_a_worker_killed_since_is_resumed_by_another(
        parking: Workers, client: RedisClient) -> None:
    parking.start("a")
    await client.send("tool:0:bob", "bob")
    rid = await _parked(client, "bob")
    last = None
    async for item in client.events("bob", None, block=0.1):
        last = item.id
        if item.data["kind"] == "turn_end":
            break
    parking.kill("a")  # the worker that raised the request is gone (kill -9)
    parking.start("b")
    assert await client.resolve_approval(rid, True)  # through the store, not a worker
    events = await events_until(client, "bob", ended(), last_id=last)
    assert events[-1]["status"] == "completed"
    lines = parking.ledger_lines()
    assert [(line[0], line[1], line[2]) for line in lines] == [("b", "start", "bob"),
                                                               ("b", "end", "bob")]
