"""Messages over HTTP (SPEC 10): every POST that gives a message answers its ``message_id``
and state; ``GET .../queue`` lists what waits; ``DELETE`` and ``PATCH /v1/messages/{id}``
withdraw or edit a message while it is queued, and say ``ok: false`` once it is not."""

from __future__ import annotations

import asyncio
from pathlib import Path

from steerable import Reply
from tests.server.conftest import gate_tools, serving, sse_events


def echo(request) -> Reply:
    users = [m.content for m in request.messages if m.role == "user"]
    return Reply(text=f"re: {users[-1]}")


async def test_queue_lists_what_waits_and_edit_and_withdraw_change_it(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), echo, echo]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        c = s.client
        first = (await c.post("/v1/sessions/q/messages", json={"text": "go"})).json()
        assert first["action"] == "started" and first["message_id"].startswith("msg_")
        await asyncio.wait_for(sse_events(c, "q", until="tool_exec_start"), 10)
        assert (await c.get("/v1/sessions/q/queue")).json() == {"messages": []}  # "go" is sent
        steer = (await c.post("/v1/sessions/q/messages",
                              json={"text": "use pytest", "policy": "steer"})).json()
        later = (await c.post("/v1/sessions/q/follow_up", json={"text": "then docs"})).json()
        extra = (await c.post("/v1/sessions/q/messages",
                              json={"text": "and a changelog", "policy": "follow_up"})).json()
        assert steer["action"] == "steered" and steer["state"] == "queued"
        assert extra["action"] == "queued" and later["ok"] is True
        queue = (await c.get("/v1/sessions/q/queue")).json()["messages"]
        assert [(m["message_id"], m["kind"], m["text"], m["state"]) for m in queue] == [
            (steer["message_id"], "send", "use pytest", "queued"),  # steered, given by send
            (later["message_id"], "send", "then docs", "queued"),
            (extra["message_id"], "send", "and a changelog", "queued")]
        assert queue[0]["turn_id"] == first["turn_id"]
        r = await c.patch(f"/v1/messages/{steer['message_id']}", json={"text": "use pytest -x"})
        assert r.json() == {"ok": True}
        assert (await c.delete(f"/v1/messages/{extra['message_id']}")).json() == {"ok": True}
        queue = (await c.get("/v1/sessions/q/queue")).json()["messages"]
        assert [m["text"] for m in queue] == ["use pytest -x", "then docs"]
        gate.set()
        await s.loop.wait_session("q")
        assert (await c.get("/v1/sessions/q/queue")).json() == {"messages": []}
        # the edited steer reached the model as edited; the withdrawn message never ran
        assert s.provider.requests[1].messages[-1].content == "use pytest -x"
        users = [m["content"] for m in (await c.get("/v1/sessions/q")).json()["messages"]
                 if m["role"] == "user"]
        assert users == ["go", "use pytest -x", "then docs"]
        # too late now: ok false, nothing changes
        for mid in (steer["message_id"], extra["message_id"], "msg_unknown"):
            assert (await c.delete(f"/v1/messages/{mid}")).json() == {"ok": False}
            assert (await c.patch(f"/v1/messages/{mid}", json={"text": "x"})).json() == \
                {"ok": False}


async def test_message_states_are_on_the_event_stream(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), echo]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        c = s.client
        first = (await c.post("/v1/sessions/e/messages", json={"text": "go"})).json()
        await asyncio.wait_for(sse_events(c, "e", until="tool_exec_start"), 10)
        steer = (await c.post("/v1/sessions/e/steer", json={"text": "look"})).json()
        gate.set()
        events = await asyncio.wait_for(sse_events(c, "e"), 10)
        states = [(e["message_id"], e["state"]) for e in events if e["kind"] == "message_state"]
        assert (first["message_id"], "delivered") in states
        assert states[-1] == (steer["message_id"], "delivered")
        delivered = next(e for e in events if e["kind"] == "message_state"
                         and e["message_id"] == steer["message_id"] and e["state"] == "delivered")
        carrying = [e["seq"] for e in events if e["kind"] == "llm_request"]
        assert delivered["request_seq"] == carrying[1]


async def test_bad_message_requests_are_refused(tmp_path: Path) -> None:
    async with serving(tmp_path, [echo]) as s:
        c = s.client
        for bad in ("x" * 200, "a b", "../etc"):
            r = await c.delete(f"/v1/messages/{bad}")
            assert r.status_code in (400, 404), bad
        r = await c.delete("/v1/messages/" + "x" * 200)
        assert r.status_code == 400 and "message id" in r.json()["error"]
        for body in ({}, {"text": ""}, {"text": 3}):
            r = await c.patch("/v1/messages/msg_1", json=body)
            assert r.status_code == 400 and "text" in r.json()["error"]
        assert (await c.get("/v1/sessions/bad id/queue")).status_code == 400
        r = await c.request("PATCH", "/v1/messages/msg_1", content=b"[1]",
                            headers={"Content-Type": "application/json"})
        assert r.status_code == 400
