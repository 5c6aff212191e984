"""The server's Redis runner shows, resumes and discards a pending turn like the local one
(whichever worker holds the session); a new message drops it, as a worker always did. Its
queue endpoints list, edit and withdraw what waits, in the holder's turn and in Redis."""

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


async def test_the_queue_of_a_session_shared_through_redis_is_listed_edited_and_withdrawn(
        redis_url: str) -> None:
    import httpx

    from steerable.server import create_app

    gate = asyncio.Event()
    worker = RedisWorker(gated_agent(gate, 2), redis_url, lease=LeaseTiming(ttl=1.0))
    runner = RedisRunner(worker)
    await runner.start()
    try:
        transport = httpx.ASGITransport(app=create_app(runner))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            first = (await c.post("/v1/sessions/q/messages", json={"text": "first"})).json()
            assert first["message_id"] and first["state"] == "queued"
            await events_until(runner.client, "q", lambda e: e["kind"] == "tool_exec_start")
            steer = (await c.post("/v1/sessions/q/steer", json={"text": "steer me"})).json()
            assert steer["ok"] is True and steer["state"] == "queued"
            later = [(await c.post("/v1/sessions/q/messages",
                                   json={"text": text, "policy": "follow_up"})).json()
                     for text in ("second", "third")]
            assert [s["action"] for s in later] == ["queued", "queued"]
            follow = (await c.post("/v1/sessions/q/follow_up", json={"text": "fourth"})).json()
            assert follow["ok"] is True
            listed = (await c.get("/v1/sessions/q/queue")).json()["messages"]
            assert [(m["message_id"], m["kind"], m["text"]) for m in listed] == [
                (steer["message_id"], "steer", "steer me"),
                (later[0]["message_id"], "send", "second"),
                (later[1]["message_id"], "send", "third"),
                (follow["message_id"], "send", "fourth")]
            assert {m["state"] for m in listed} == {"queued"}
            edit = {"text": "second, edited"}
            assert (await c.patch(f"/v1/messages/{later[0]['message_id']}", json=edit)).json() \
                == {"ok": True}
            assert (await c.patch(f"/v1/messages/{steer['message_id']}",
                                  json={"text": "steer me better"})).json() == {"ok": True}
            for gone in (later[1], follow):
                assert (await c.delete(f"/v1/messages/{gone['message_id']}")).json() \
                    == {"ok": True}
            assert (await c.delete(f"/v1/messages/{later[1]['message_id']}")).json() \
                == {"ok": False}  # withdrawn already
            assert (await c.delete("/v1/messages/msg_nobody")).json() == {"ok": False}
            listed = (await c.get("/v1/sessions/q/queue")).json()["messages"]
            assert [m["text"] for m in listed] == ["steer me better", "second, edited"]
            gate.set()
            events = await events_until(runner.client, "q", ended(2))
            await idle(runner, "q")
            assert (await c.get("/v1/sessions/q/queue")).json() == {"messages": []}
            # A taken message is no longer the caller's to change.
            assert (await c.delete(f"/v1/messages/{later[0]['message_id']}")).json() \
                == {"ok": False}
        seen = [m.content for r in worker.loop.agent.provider.requests  # type: ignore[attr-defined]
                for m in r.messages if m.role == "user"]
        assert "steer me better" in seen and "second, edited" in seen
        assert not {"steer me", "second", "third", "fourth"} & set(seen)
        delivered = {e["message_id"] for e in events
                     if e["kind"] == "message_state" and e["state"] == "delivered"}
        assert {first["message_id"], steer["message_id"], later[0]["message_id"]} <= delivered
    finally:
        gate.set()
        await runner.aclose()
