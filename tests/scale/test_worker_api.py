"""RedisWorker and RedisClient driven in one process (the protocol is the same as across
processes; test_workers.py runs real worker processes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from steerable import Agent, HumanApprover, Reply, ScriptedProvider, tool
from steerable.scale import LeaseTiming, RedisClient, RedisWorker
from steerable.storage import RedisSessionStore
from tests._redis import RedisServer
from tests.scale._harness import ended, events_until


@tool
def write_note(text: str) -> str:
    """Write a note."""
    return f"wrote {text}"


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[RedisClient]:
    made = RedisClient(redis_url, reply_timeout=2.0)
    yield made
    await made.aclose()


async def running(worker: RedisWorker) -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    return task


async def stopped(worker: RedisWorker, task: asyncio.Task[None]) -> None:
    worker.stop()
    await asyncio.wait_for(task, 20)


async def test_an_approval_raised_on_a_worker_is_answered_from_anywhere(
        redis_url: str, client: RedisClient) -> None:
    agent = Agent(name="a", provider=ScriptedProvider([
        Reply(tool_calls=[("write_note", {"text": "x"})]), Reply(text="ok")]),
        tools=[write_note])
    worker = RedisWorker(agent, redis_url, lease=LeaseTiming(ttl=1.0))
    worker.loop.register_hook(HumanApprover())
    task = await running(worker)
    try:
        await client.send("note it", "ap")
        asked = await events_until(client, "ap", lambda e: e["kind"] == "approval_requested")
        request_id = asked[-1]["request_id"]
        assert not await client.resolve_approval("no-such-request", True)
        assert await client.resolve_approval(request_id, True)
        events = await events_until(client, "ap", ended())
        assert [e["is_error"] for e in events if e["kind"] == "tool_exec_end"] == [False]
        assert not await client.resolve_approval(request_id, True)  # answered already
    finally:
        await stopped(worker, task)


async def test_event_streams_are_capped_and_expire(redis_url: str, client: RedisClient) -> None:
    agent = Agent(name="a", provider=ScriptedProvider(
        [Reply(text="word " * 40) for _ in range(8)]))
    worker = RedisWorker(agent, redis_url, events_maxlen=50, events_ttl=30)
    task = await running(worker)
    try:
        for i in range(8):
            await client.send(f"m{i}", "capped", policy="follow_up")
        store = RedisSessionStore(redis_url)
        for _ in range(400):
            if len(store.load("capped")) == 16:
                break
            await asyncio.sleep(0.05)
        assert len(store.load("capped")) == 16
        key = client.keys.events("capped")
        produced = 8 * 45  # each turn emits more than 45 events (40 deltas)
        length = await client._redis.xlen(key)
        assert length < produced and length >= 50
        assert 0 < await client._redis.ttl(key) <= 30
    finally:
        await stopped(worker, task)


async def test_the_default_store_is_redis_and_writes_are_fenced(redis_url: str,
                                                                client: RedisClient) -> None:
    agent = Agent(name="a", provider=ScriptedProvider([Reply(text="one")]))
    worker = RedisWorker(agent, redis_url)
    assert isinstance(worker.store.inner, RedisSessionStore)
    from steerable._core._session import TurnRecord
    from steerable._messages import Message
    from steerable.storage import LeaseLostError

    with pytest.raises(LeaseLostError, match="no longer holds"):
        worker.store.append("unheld", [Message("user", "x")], TurnRecord("t", "completed", 1))
    task = await running(worker)
    try:
        await client.send("hello", "fenced")
        await events_until(client, "fenced", ended())
        assert [m.content for m in RedisSessionStore(redis_url).load("fenced")] == ["hello", "one"]
    finally:
        await stopped(worker, task)


def test_bad_arguments_are_refused(redis_url: str) -> None:
    agent = Agent(name="a", provider=ScriptedProvider([]))
    with pytest.raises(ValueError, match="max_sessions"):
        RedisWorker(agent, redis_url, max_sessions=0)
    with pytest.raises(ValueError, match="lease ttl"):
        LeaseTiming(ttl=0.01)


async def test_client_refuses_bad_input(client: RedisClient) -> None:
    from steerable.errors import ConfigurationError

    with pytest.raises(ValueError, match="busy policy"):
        await client.send("x", "s", policy="shout")
    with pytest.raises(ValueError, match="non-empty"):
        await client.send("  ", "s")
    with pytest.raises(ConfigurationError, match="invalid session id"):
        await client.send("x", "../etc")
    with pytest.raises(ValueError, match="interrupt mode"):
        await client.interrupt("s", "soft")
    assert not await client.interrupt("idle-session")


async def test_a_worker_stops_even_while_redis_is_down(own_redis: RedisServer) -> None:
    agent = Agent(name="a", provider=ScriptedProvider([Reply(text="slow", delay=30)]))
    worker = RedisWorker(agent, own_redis.url, lease=LeaseTiming(ttl=1.0))
    client = RedisClient(own_redis.url)
    task = await running(worker)
    try:
        await client.send("hello", "down")
        await events_until(client, "down", lambda e: e["kind"] == "llm_request")
    finally:
        await client.aclose()
    own_redis.stop()
    await asyncio.sleep(0.3)
    await stopped(worker, task)  # within the lease time plus a little, not forever


async def test_a_turn_whose_save_fails_while_redis_stalls_runs_again(redis_url: str,
                                                                    client: RedisClient) -> None:
    paused = asyncio.Event()

    async def first_try(request: object) -> Reply:
        # The model answers once writes are paused (not after a delay the test hopes is long
        # enough to see the request and pause: under load the turn had ended by then).
        await paused.wait()
        return Reply(text="first try")

    agent = Agent(name="a", provider=ScriptedProvider([first_try, Reply(text="second try")]))
    worker = RedisWorker(agent, redis_url, lease=LeaseTiming(ttl=20.0))
    task = await running(worker)
    try:
        await client.send("hello", "stall")
        await events_until(client, "stall", lambda e: e["kind"] == "llm_request")
        # Writes stall longer than the store's 5 s socket timeout: the save at turn end fails.
        # 7.5 s: the first save (right after the answer) has 2.5 s to start before it could
        # outlast the pause, and the second (after the first timed out) 2.5 s to start after.
        await client._redis.execute_command("CLIENT", "PAUSE", 7500, "WRITE")
        paused.set()
        events = await events_until(client, "stall", ended(2), timeout=40)
        statuses = [e["status"] for e in events if e["kind"] == "turn_end"]
        assert statuses == ["error", "completed"]
        store = RedisSessionStore(redis_url)
        for _ in range(100):
            if store.load("stall"):
                break
            await asyncio.sleep(0.05)
        assert [m.content for m in store.load("stall")] == ["hello", "second try"]
    finally:
        await stopped(worker, task)


async def test_a_silent_holder_gives_a_clear_error_and_queued_messages_wait_for_it(
        redis_url: str) -> None:
    import time

    from steerable.scale import WorkerUnavailableError

    client = RedisClient(redis_url, reply_timeout=0.3)
    # A worker that died holding "ghost" a moment ago: its lease has 1.5 s left.
    deadline = int(time.time() * 1000) + 1500
    await client._redis.set(client.keys.lease("ghost"), "dead-w:1", px=1500)
    await client._redis.zadd(client.keys.active, {"ghost": deadline})
    agent = Agent(name="a", provider=ScriptedProvider([Reply(text="answered")]))
    worker = RedisWorker(agent, redis_url, lease=LeaseTiming(ttl=1.0))
    task = await running(worker)
    try:
        # No process holds a connection named after dead-w: it is known gone at once.
        with pytest.raises(WorkerUnavailableError, match=r"worker dead-w .* is gone"):
            await client.steer("anyone?", "ghost")
        assert (await client.send("still there?", "ghost")).action == "queued"
        assert await client.holder("ghost") == "dead-w"
        events = await events_until(client, "ghost", ended(), timeout=20)
        assert events[-1]["status"] == "completed"
        assert worker.statistics().worker_id == worker.worker_id
        store = RedisSessionStore(redis_url)
        assert [m.content for m in store.load("ghost")] == ["still there?", "answered"]
    finally:
        await stopped(worker, task)
        await client.aclose()


async def test_a_renewal_racing_a_let_go_does_not_stop_the_next_turn(redis_url: str) -> None:
    # The renewal of token T1 is on its way while the session is let go and taken again with
    # T2 (its next turn running): T1's refusal must not be read as losing the session.
    agent = Agent(name="a", provider=ScriptedProvider([Reply(text="x", delay=5)]))
    worker = RedisWorker(agent, redis_url)
    task = await running(worker)
    client = RedisClient(redis_url)
    try:
        await client.send("hello", "race")
        await events_until(client, "race", lambda e: e["kind"] == "llm_request")
        current = worker.tokens["race"]

        async def renew_while_retaken(session_id: str, token: str) -> bool:
            worker.tokens[session_id] = current  # what the runner holds now
            return False  # the stale token T1 is refused

        worker.tokens["race"] = "stale-w:0"
        worker.leases.renew = renew_while_retaken  # type: ignore[method-assign]
        await worker._renew_once()
        assert worker.tokens["race"] == current
        assert worker.loop.active_turn("race") is not None  # its turn still runs
    finally:
        await stopped(worker, task)
        await client.aclose()
