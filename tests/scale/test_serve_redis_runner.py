"""The server's Redis runner shows, resumes and discards a pending turn like the local one
(whichever worker holds the session); a new message drops it, as a worker always did. Its
queue endpoints say plainly (501) that they are not built across workers."""

from __future__ import annotations

import asyncio

import pytest

from steerable import Agent, Reply, ScriptedProvider, tool
from steerable.errors import SessionBusyError
from steerable.scale import LeaseTiming, RedisWorker
from tests.scale._harness import ended, events_until

pytest.importorskip("starlette", reason="the server extra is not installed")
from steerable.server._redis_runner import RedisRunner


def gated_agent(gate: asyncio.Event, replies: int) -> Agent:
    @tool
    async def work(step: str) -> str:
        """A step that waits for the gate."""
        await gate.wait()
        return f"did {step}"

    def echo(request) -> Reply:
        users = [m.content for m in request.messages if m.role == "user"]
        return Reply(text=f"re: {users[-1]}")

    script = []
    for _ in range(replies):
        script += [Reply(tool_calls=[("work", {"step": "a"})]), echo]
    return Agent(name="a", provider=ScriptedProvider(script), tools=[work])


async def cursor(runner: RedisRunner, sid: str) -> str:
    """The id of the session's newest event, to follow only what comes next."""
    last = await runner.client._redis.xrevrange(runner.client.keys.events(sid), count=1)
    return last[0][0].decode() if last else "0-0"


async def idle(runner: RedisRunner, sid: str) -> None:
    while await runner._busy(sid):  # the lease is released just after TURN_END
        await asyncio.sleep(0.02)


async def cancel_after_tools(runner: RedisRunner, sid: str, text: str,
                             gate: asyncio.Event) -> None:
    after = await cursor(runner, sid)
    await runner.send(sid, text, None)
    await events_until(runner.client, sid, lambda e: e["kind"] == "tool_exec_start",
                       last_id=after)
    assert await runner.cancel(sid, "after_tools")
    gate.set()
    events = await events_until(runner.client, sid, ended(), last_id=after)
    assert events[-1]["status"] == "cancelled"
    gate.clear()
    await idle(runner, sid)


async def test_pending_turn_shown_resumed_and_discarded_through_redis(redis_url: str) -> None:
    gate = asyncio.Event()
    worker = RedisWorker(gated_agent(gate, 3), redis_url, lease=LeaseTiming(ttl=1.0))
    runner = RedisRunner(worker)
    await runner.start()
    try:
        await cancel_after_tools(runner, "r", "build it", gate)
        got = await runner.get_session("r")  # no history yet: shown, not a 404
        assert got["messages"] == [] and got["busy"] is False
        assert got["pending_turn"]["input"] == "build it"
        assert got["pending_turn"]["cancel_mode"] == "after_tools"
        after = await cursor(runner, "r")
        sent = await runner.resume("r")
        assert sent.action == "resumed"
        events = await events_until(runner.client, "r", ended(), last_id=after)
        assert events[0]["resumed_from"] is not None and events[-1]["status"] == "completed"
        await idle(runner, "r")
        got = await runner.get_session("r")
        assert got["pending_turn"] is None
        assert [m["content"] for m in got["messages"] if m["role"] != "tool"][-1] == \
            "re: build it"
        with pytest.raises(LookupError):
            await runner.resume("r")
        with pytest.raises(LookupError):
            await runner.discard_pending("r")
        gate.clear()
        await cancel_after_tools(runner, "r", "doomed", gate)
        assert (await runner.get_session("r"))["pending_turn"]["input"] == "doomed"
        await runner.discard_pending("r")
        got = await runner.get_session("r")
        assert got["pending_turn"] is None
        assert "doomed" not in [m["content"] for m in got["messages"]]
    finally:
        gate.set()
        await runner.aclose()


async def test_a_running_turn_is_neither_resumed_nor_discarded_through_redis(
        redis_url: str) -> None:
    gate = asyncio.Event()
    worker = RedisWorker(gated_agent(gate, 1), redis_url, lease=LeaseTiming(ttl=1.0))
    runner = RedisRunner(worker)
    await runner.start()
    try:
        await runner.send("b", "go", None)
        await events_until(runner.client, "b", lambda e: e["kind"] == "tool_exec_start")
        assert (await runner.get_session("b"))["pending_turn"] is None
        with pytest.raises(SessionBusyError):
            await runner.resume("b")
        with pytest.raises(SessionBusyError):
            await runner.discard_pending("b")
        gate.set()
        await events_until(runner.client, "b", ended())
    finally:
        gate.set()
        await runner.aclose()


async def test_the_queue_of_a_session_shared_through_redis_is_a_clear_501(
        redis_url: str) -> None:
    import httpx

    from steerable.server import create_app

    worker = RedisWorker(gated_agent(asyncio.Event(), 1), redis_url)
    runner = RedisRunner(worker)
    await runner.start()
    try:
        transport = httpx.ASGITransport(app=create_app(runner))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            for method, path, body in (("GET", "/v1/sessions/s/queue", None),
                                       ("DELETE", "/v1/messages/msg_1", None),
                                       ("PATCH", "/v1/messages/msg_1", {"text": "x"})):
                r = await c.request(method, path, json=body)
                assert r.status_code == 501 and "--redis" in r.json()["error"], path
    finally:
        await runner.aclose()
