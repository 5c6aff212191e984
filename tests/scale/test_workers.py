"""Several real worker processes sharing sessions through a real redis-server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from steerable.scale import RedisClient
from steerable.storage import RedisSessionStore
from tests._redis import RedisServer
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


async def released(client: RedisClient, session_id: str) -> None:
    for _ in range(250):
        if await client.holder(session_id) is None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"session {session_id} still held")


def contents(redis_url: str, session_id: str) -> list[str]:
    store = RedisSessionStore(redis_url)
    try:
        messages = store.load(session_id)
        assert_history_consistent(messages)
        return [f"{m.role}:{m.content}" for m in messages
                if m.role in ("user", "assistant") and not m.tool_calls]
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
    await released(client, "s1")  # the lease is let go once the queue is empty
    assert contents(redis_url, "s1") == ["user:hello", "assistant:done hello"]


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


async def test_a_steer_acknowledged_just_before_kill_9_is_delivered_once(
        workers: Workers, client: RedisClient, redis_url: str) -> None:
    """"steered" means written: the worker that took over resumes the turn with the steer."""
    workers.start("a", "b")
    await client.send("tool:3.0:z", "sz")
    await events_until(client, "sz", lambda e: e["kind"] == "tool_exec_start")
    victim = Workers.name_of(await client.holder("sz"))
    cursor = await _cursor(client, "sz")
    assert await client.steer("mind the edge case", "sz")
    workers.kill(victim)  # before the turn's next safe point: only the steer's own write has it
    events = await events_until(client, "sz", ended(), last_id=cursor, timeout=30)
    assert events[-1]["status"] == "completed"
    steered = [e for e in events if e["kind"] == "message_state"
               and e["text"] == "mind the edge case"]
    assert [e["state"] for e in steered][-1:] == ["delivered"]
    assert len({e["message_id"] for e in steered}) == 1
    assert len([e for e in steered if e["state"] == "delivered"]) == 1
    await released(client, "sz")
    assert contents(redis_url, "sz").count("user:mind the edge case") == 1


async def _cursor(client: RedisClient, session_id: str) -> str:
    """The id of the session's newest event, to follow only what comes next."""
    last = await client._redis.xrevrange(client.keys.events(session_id), count=1)
    return last[0][0].decode() if last else "0-0"


@pytest.mark.parametrize("where", ["mid-tool", "mid-stream"])
async def test_kill_9_of_the_worker_running_a_turn_loses_nothing(
        where: str, workers: Workers, client: RedisClient, redis_url: str) -> None:
    workers.start("a", "b", "c")
    order = "tool:2.0:k" if where == "mid-tool" else "slow:2.0:k"
    await client.send(order, "sk")
    marker = "tool_exec_start" if where == "mid-tool" else "llm_delta"
    await events_until(client, "sk", lambda e: e["kind"] == marker)
    victim = Workers.name_of(await client.holder("sk"))
    assert (await client.send("after1", "sk", policy="follow_up")).action == "queued"
    assert (await client.send("after2", "sk", policy="follow_up")).action == "queued"
    cursor = await _cursor(client, "sk")
    workers.kill(victim)
    killed = time.monotonic()
    events = await events_until(client, "sk", ended(3), last_id=cursor, timeout=30)
    recovered = next(e for e in events if e["kind"] == "turn_start")
    assert recovered["time"] - time.time() + (time.monotonic() - killed) < 8 * workers.ttl
    assert [e["status"] for e in events if e["kind"] == "turn_end"] == ["completed"] * 3
    await released(client, "sk")
    assert contents(redis_url, "sk") == [f"user:{order}", "assistant:done k",
                                         "user:after1", "assistant:done after1",
                                         "user:after2", "assistant:done after2"]
    if where == "mid-tool":
        lines = workers.ledger_lines()
        # At least once for the tool call in flight: it started on the victim and ran again.
        assert next(line[0] for line in lines if line[1:3] == ["start", "k"]) == victim
        ends = [line[0] for line in lines if line[1:3] == ["end", "k"]]
        assert len(ends) == 1 and ends[0] != victim


async def test_per_session_order_under_concurrent_posts(workers: Workers, redis_url: str) -> None:
    workers.start("a", "b", "c")
    clients = [RedisClient(redis_url) for _ in range(3)]
    try:
        async def post(session: str, n: int) -> None:
            for i in range(n):
                await clients[i % 3].send(f"{session}-m{i}", session, policy="follow_up")

        sessions = [f"o{i}" for i in range(6)]
        await asyncio.gather(*(post(s, 8) for s in sessions))
        await asyncio.gather(*(events_until(clients[0], s, ended(8), timeout=60)
                               for s in sessions))
    finally:
        for made in clients:
            await made.aclose()
    for session in sessions:
        assert contents(redis_url, session) == [
            part for i in range(8)
            for part in (f"user:{session}-m{i}", f"assistant:done {session}-m{i}")]


async def test_sessions_spread_over_workers(workers: Workers, client: RedisClient) -> None:
    workers.start("a", "b")
    for i in range(6):
        await client.send(f"tool:0.6:t{i}", f"p{i}")
    await asyncio.gather(*(events_until(client, f"p{i}", ended()) for i in range(6)))
    lines = workers.ledger_lines()
    by_worker = {line[0] for line in lines if line[1] == "end"}
    assert by_worker == {"a", "b"}
    # Several sessions ran at once: some tool started before another one ended.
    starts = sorted(float(line[3]) for line in lines if line[1] == "start")
    ends = sorted(float(line[3]) for line in lines if line[1] == "end")
    assert starts[1] < ends[0]


async def test_a_slow_follower_misses_nothing_and_slows_nothing(
        workers: Workers, client: RedisClient, redis_url: str) -> None:
    workers.start("a")
    for i in range(5):
        await client.send(f"slow:0.01:e{i}", "slowpoke", policy="follow_up")
    seen: list[dict[str, object]] = []
    async for item in client.events("slowpoke", block=0.2):
        seen.append(item.data)
        if len(seen) == 3:
            # Still reading its third event, while the worker finished all five turns.
            for _ in range(200):
                if len(contents(redis_url, "slowpoke")) == 10:
                    break
                await asyncio.sleep(0.05)
            assert len(contents(redis_url, "slowpoke")) == 10
        await asyncio.sleep(0.005)
        if sum(1 for e in seen if e["kind"] == "turn_end") == 5:
            break
    seqs = [int(str(e["seq"])) for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [e["kind"] for e in seen].count("turn_start") == 5


async def test_redis_restarted_mid_run(own_redis: RedisServer, tmp_path: Path) -> None:
    from steerable.storage import RedisUnavailableError

    workers = Workers(own_redis.url, tmp_path, ttl=1.0)
    client = RedisClient(own_redis.url, reply_timeout=2.0)
    try:
        workers.start("a", "b")
        await client.send("tool:1.5:r", "sr")
        await events_until(client, "sr", lambda e: e["kind"] == "tool_exec_start")
        own_redis.stop()
        with pytest.raises(RedisUnavailableError, match=r"did not answer.*nothing was queued"):
            await client.send("meanwhile", "other")
        await asyncio.sleep(0.5)
        own_redis.start()  # empty: persistence is off in tests
        # The running turn finishes and is saved into the new Redis; the workers reconnect.
        for _ in range(300):
            if contents(own_redis.url, "sr"):
                break
            await asyncio.sleep(0.05)
        assert contents(own_redis.url, "sr") == ["user:tool:1.5:r", "assistant:done r"]
        follow = asyncio.create_task(events_until(client, "after", ended()))
        await client.send("back again", "after")
        assert (await follow)[-1]["status"] == "completed"
        assert contents(own_redis.url, "after") == ["user:back again",
                                                    "assistant:done back again"]
    finally:
        workers.stop_all()
        await client.aclose()


async def test_a_stopped_worker_hands_its_turn_over_at_once(workers: Workers,
                                                            client: RedisClient,
                                                            redis_url: str) -> None:
    import signal

    workers.start("a", "b")
    await client.send("tool:1.0:h", "sh")
    await events_until(client, "sh", lambda e: e["kind"] == "tool_exec_start")
    victim = Workers.name_of(await client.holder("sh"))
    cursor = await _cursor(client, "sh")
    workers.procs[victim].send_signal(signal.SIGTERM)
    events = await events_until(client, "sh", lambda e: e["kind"] == "turn_end"
                                and e["status"] == "completed", last_id=cursor)
    assert [e["status"] for e in events if e["kind"] == "turn_end"] == ["aborted", "completed"]
    assert workers.procs[victim].wait(timeout=10) == 0
    assert contents(redis_url, "sh") == ["user:tool:1.0:h", "assistant:done h"]


async def test_short_leases_under_churn_never_abort_a_turn(redis_url: str, tmp_path: Path) -> None:
    # Renewals every 5 ms race with sessions let go and taken again between turns: a renewal
    # of a token just given up must not be mistaken for a lost lease. (The lease itself lasts
    # 2 s, so that a loaded machine's stalls do not make it expire for real.)
    workers = Workers(redis_url, tmp_path, ttl=2.0, renew=0.005)
    client = RedisClient(redis_url)
    try:
        workers.start("a", "b")
        sessions = [f"churn{i}" for i in range(16)]
        follows = [asyncio.create_task(events_until(client, s, ended(15), timeout=90))
                   for s in sessions]
        for i in range(15):
            # Each message lands about when the previous turn ends: sessions are let go and
            # taken again all the time.
            await asyncio.gather(*(client.send(f"{s}-{i}", s, policy="follow_up")
                                   for s in sessions))
            await asyncio.sleep(0.01 * (i % 3))
        for events in await asyncio.gather(*follows):
            assert {e["status"] for e in events if e["kind"] == "turn_end"} == {"completed"}
    finally:
        workers.stop_all()
        await client.aclose()


async def test_failover_resumes_from_the_checkpoint_without_redoing_finished_tools(
        workers: Workers, client: RedisClient, redis_url: str) -> None:
    workers.start("a", "b")
    await client.send("tools2:1.0:c", "sc")
    # Kill the holder while the second call runs: the first one's result is checkpointed.
    await events_until(client, "sc", lambda e: e["kind"] == "tool_exec_start"
                       and e["tool_name"] == "work" and e["call_id"] and
                       sum(1 for line in workers.ledger_lines() if line[1] == "start") == 2)
    victim = Workers.name_of(await client.holder("sc"))
    cursor = await _cursor(client, "sc")
    workers.kill(victim)
    events = await events_until(client, "sc", ended(), last_id=cursor, timeout=30)
    assert events[-1]["status"] == "completed"
    assert not [e for e in events if e["kind"] == "llm_request"][:-1]  # no LLM call redone
    starts = [(line[0], line[2]) for line in workers.ledger_lines() if line[1] == "start"]
    assert starts.count((victim, "c-1")) == 1 and [t for _, t in starts].count("c-1") == 1
    assert [t for _, t in starts].count("c-2") == 2  # the call in flight ran again
    await released(client, "sc")
    history = contents(redis_url, "sc")
    assert history == ["user:tools2:1.0:c", "assistant:done c-2"]


async def test_cancel_through_any_process_then_resume(workers: Workers, client: RedisClient,
                                                      redis_url: str) -> None:
    workers.start("a", "b")
    await client.send("tools2:0.5:r", "sx")
    await events_until(client, "sx", lambda e: e["kind"] == "tool_exec_start")
    assert await client.cancel("sx", "after_tools")
    events = await events_until(client, "sx", ended())
    assert events[-1]["status"] == "cancelled"
    await released(client, "sx")
    assert contents(redis_url, "sx") == []  # a checkpoint is not history
    assert (await client.resume("sx")).action == "started"
    events = await events_until(client, "sx", ended(2))
    assert events[-1]["status"] == "completed"
    assert contents(redis_url, "sx") == ["user:tools2:0.5:r", "assistant:done r-2"]


async def test_workers_sharing_a_sqlite_store_fail_over_too(redis_url: str, tmp_path: Path,
                                                            client: RedisClient) -> None:
    from steerable.storage import SQLiteSessionStore

    db = tmp_path / "sessions.sqlite"
    workers = Workers(redis_url, tmp_path, ttl=1.0, sqlite=db)
    try:
        workers.start("a", "b")
        for i in range(3):
            await client.send(f"m{i}", f"q{i}")
        await client.send("tools2:1.0:z", "qz")
        await events_until(client, "qz", lambda e: e["kind"] == "tool_exec_start")
        victim = Workers.name_of(await client.holder("qz"))
        cursor = await _cursor(client, "qz")
        workers.kill(victim)
        events = await events_until(client, "qz", ended(), last_id=cursor, timeout=30)
        assert events[-1]["status"] == "completed"
        await released(client, "qz")
        store = SQLiteSessionStore(db)
        assert [m.content for m in store.load("qz") if not m.tool_calls
                and m.role != "tool"] == ["tools2:1.0:z", "done z-2"]
        for i in range(3):
            assert [m.content for m in store.load(f"q{i}")] == [f"m{i}", f"done m{i}"]
        assert store.load_checkpoint("qz") is None  # the finished turn dropped it
    finally:
        workers.stop_all()
