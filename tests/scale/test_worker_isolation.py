"""What one worker process must never do to another's sessions, with real processes and a real
redis-server: answer the wrong approval, write after losing its lease, keep a poster waiting
for an answer it can no longer give."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from steerable.scale import RedisClient
from tests.scale._harness import Workers, ended, events_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[RedisClient]:
    made = RedisClient(redis_url, reply_timeout=5.0)
    yield made
    await made.aclose()


@pytest.fixture
def asking(redis_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Workers that run one session each and ask a person before every ``work`` call."""
    made = Workers(redis_url, tmp_path, ttl=1.0)
    made.env.update(TEST_ASK="1", TEST_MAX_SESSIONS="1")
    yield made
    made.stop_all()


async def _asked(client: RedisClient, session_id: str) -> str:
    events = await events_until(client, session_id, lambda e: e["kind"] == "approval_requested")
    return str(events[-1]["request_id"])


async def test_answering_one_users_approval_never_runs_another_users_call(
        asking: Workers, client: RedisClient) -> None:
    asking.start("a")
    await client.send("tool:0:alice", "alice")
    alice = await _asked(client, "alice")
    asking.start("b")  # a is full (one session): bob's session goes to b
    await client.send("tool:0:bob", "bob")
    bob = await _asked(client, "bob")
    assert {await client.holder("alice"), await client.holder("bob")} == {"a-w", "b-w"}
    # Unguessable and distinct across processes (they used to be approval_1 on both).
    assert alice != bob
    assert all(len(rid.removeprefix("approval_")) == 32 for rid in (alice, bob))  # 128 bits

    assert await client.resolve_approval(bob, True)
    await events_until(client, "bob", ended())
    ran = [line[1:3] for line in asking.ledger_lines()]
    assert ran == [["start", "bob"], ["end", "bob"]]  # alice's call still waits for alice
    assert not await client.resolve_approval(bob, True)  # answered: not a key to alice's

    assert await client.resolve_approval(alice, False, "not now")
    events = await events_until(client, "alice", ended())
    assert [e["approved"] for e in events if e["kind"] == "approval_resolved"] == [False]
    assert [e["kind"] for e in events if e["kind"].startswith("tool_exec")] == [
        "tool_exec_skipped"]
    assert [line[1:3] for line in asking.ledger_lines()] == ran


@pytest.fixture
def workers(redis_url: str, tmp_path: Path) -> Iterator[Workers]:
    made = Workers(redis_url, tmp_path, ttl=1.0)
    yield made
    made.stop_all()


@pytest.mark.parametrize("policy", ["steer", "follow_up", "interrupt"])
async def test_a_post_to_a_session_whose_holder_died_is_queued_at_once(
        policy: str, workers: Workers, client: RedisClient) -> None:
    workers.start("a", "b")
    await client.send("tool:2.0:k", "sd")
    await events_until(client, "sd", lambda e: e["kind"] == "tool_exec_start")
    workers.kill(Workers.name_of(await client.holder("sd")))
    started = time.monotonic()
    sent = await client.send("after", "sd", policy=policy)
    took = time.monotonic() - started
    assert sent.action == "queued"
    assert took < 1.0, f"the poster waited {took:.2f} s for a dead worker"
    events = await events_until(client, "sd", ended(2), timeout=30)
    assert [e["status"] for e in events if e["kind"] == "turn_end"][-2:] == ["completed"] * 2


async def test_a_worker_continued_after_its_lease_ended_adds_nothing_after_the_new_holder(
        workers: Workers, client: RedisClient) -> None:
    workers.start("a")
    await client.send("tool:2.0:z", "sz")
    started = await events_until(client, "sz", lambda e: e["kind"] == "tool_exec_start")
    old_turn = started[0]["turn_id"]
    zombie = workers.procs["a"]
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        workers.start("b")  # takes the session over once a's lease ends, resumes the turn
        events = await events_until(client, "sz", lambda e: e["kind"] == "turn_start"
                                    and e["turn_id"] != old_turn, timeout=30)
        new_turn = events[-1]["turn_id"]
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    await events_until(client, "sz", lambda e: e["kind"] == "turn_end"
                       and e["turn_id"] == new_turn, timeout=30)
    # The continued worker's turn runs on until it sees its lease gone, then ends (aborted or
    # completed): give it time to try to publish that, then read the whole stream.
    await asyncio.sleep(2.5)
    assert zombie.poll() is None
    stream = await _all_events(client, "sz")
    first_new = next(i for i, e in enumerate(stream) if e["turn_id"] == new_turn)
    late = [e["kind"] for e in stream[first_new:] if e["turn_id"] == old_turn]
    assert late == [], f"the stopped worker appended {late} after the new holder's events"
    assert stream[-1]["kind"] == "turn_end" and stream[-1]["turn_id"] == new_turn
    assert [line[:3] for line in workers.ledger_lines() if line[0] == "b"] == [
        ["b", "start", "z"], ["b", "end", "z"]]


async def _all_events(client: RedisClient, session_id: str) -> list[dict[str, Any]]:
    entries = await client._redis.xrange(client.keys.events(session_id))
    return [json.loads(fields[b"e"]) for _, fields in entries]
