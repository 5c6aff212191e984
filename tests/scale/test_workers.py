"""Several real worker processes sharing sessions through a real redis-server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from steerable.scale import RedisClient
from steerable.storage import RedisSessionStore
from tests.conftest import assert_history_consistent
from tests.scale._harness import Workers, ended, events_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[RedisClient]:
    made = RedisClient(redis_url, reply_timeout=2.0)
    yield made
    await made.aclose()


@pytest.fixture
def workers(redis_url: str, tmp_path: Path) -> AsyncIterator[Workers]:
    made = Workers(redis_url, tmp_path, ttl=1.0)
    yield made
    made.stop_all()


def contents(redis_url: str, session_id: str) -> list[str]:
    store = RedisSessionStore(redis_url)
    try:
        messages = store.load(session_id)
        assert_history_consistent(messages)
        return [f"{m.role}:{m.content}" for m in messages if m.role in ("user", "assistant")]
    finally:
        store.close()


async def test_a_message_posted_anywhere_runs_once_and_its_events_reach_any_follower(
        workers: Workers, client: RedisClient, redis_url: str) -> None:
    workers.start("a", "b")
    follow = asyncio.create_task(events_until(client, "s1", ended()))
    sent = await client.send("hello", "s1")
    assert sent.action == "started"
    events = await follow
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_end"
    assert events[-1]["status"] == "completed" and events[-1]["session_id"] == "s1"
    assert "llm_delta" in kinds
    assert contents(redis_url, "s1") == ["user:hello", "assistant:done hello"]
    await asyncio.sleep(0.3)  # nothing else runs it
    assert contents(redis_url, "s1") == ["user:hello", "assistant:done hello"]
    assert await client.holder("s1") is None  # the lease was released


async def test_steer_through_any_process_reaches_the_turn(workers: Workers, client: RedisClient,
                                                          redis_url: str) -> None:
    workers.start("a", "b")
    await client.send("tool:1.0:x", "s2")
    await events_until(client, "s2", lambda e: e["kind"] == "tool_exec_start")
    assert await client.holder("s2") in ("a-w", "b-w")
    started = time.monotonic()
    assert await client.steer("also check y", "s2")
    events = await events_until(client, "s2", ended())
    injected = [e for e in events if e["kind"] == "steering_injected"]
    assert [e["text"] for e in injected] == ["also check y"]
    assert time.monotonic() - started < 10
    history = contents(redis_url, "s2")
    assert history[0] == "user:tool:1.0:x" and "user:also check y" in history


async def test_busy_policies_give_the_answers_of_one_process(workers: Workers,
                                                             client: RedisClient,
                                                             redis_url: str) -> None:
    from steerable.errors import SessionBusyError

    workers.start("a", "b")
    await client.send("tool:1.0:p", "s3")
    await events_until(client, "s3", lambda e: e["kind"] == "tool_exec_start")
    with pytest.raises(SessionBusyError, match="busy"):
        await client.send("no thanks", "s3", policy="reject")
    queued = await client.send("after", "s3", policy="follow_up")
    assert queued.action == "queued" and queued.turn_id is not None
    steered = await client.send("steer me", "s3")
    assert steered.action == "steered" and steered.turn_id == queued.turn_id
    await events_until(client, "s3", ended(2))
    assert contents(redis_url, "s3")[-2:] == ["user:after", "assistant:done after"]
    assert "user:no thanks" not in contents(redis_url, "s3")
    assert not await client.steer("nobody runs", "s3")
