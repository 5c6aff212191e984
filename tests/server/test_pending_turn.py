"""A turn left pending by a cancel is shown, resumed and discarded over HTTP, never a dead end:
``GET`` shows it (even on a session with no history yet), a new message is a 409 that names
the three ways on, ``POST .../resume`` continues it, ``DELETE .../pending_turn`` drops it,
``"discard_pending": true`` drops it and sends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from steerable import Reply
from tests.server.conftest import Served, gate_tools, serving, sse_events


def echo(request) -> Reply:
    users = [m.content for m in request.messages if m.role == "user"]
    return Reply(text=f"re: {users[-1]}")


async def cancelled_turn(s: Served, sid: str, text: str, gate: asyncio.Event) -> dict:
    """Send ``text`` (the script asks for the gated tool), cancel after the tool: pending."""
    after = s.runner.hub.cursor(sid)
    assert (await s.client.post(f"/v1/sessions/{sid}/messages", json={"text": text})
            ).status_code == 202
    await asyncio.wait_for(sse_events(s.client, sid, until="tool_exec_start",
                                      last_event_id=after), 10)
    r = await s.client.post(f"/v1/sessions/{sid}/cancel", json={"mode": "after_tools"})
    assert r.json() == {"ok": True}
    gate.set()
    await s.loop.wait_session(sid)
    gate.clear()
    got = await s.client.get(f"/v1/sessions/{sid}")
    assert got.status_code == 200
    return got.json()


def users(session: dict) -> list[str]:
    return [m["content"] for m in session["messages"] if m["role"] == "user"]


async def test_a_first_turn_cancelled_is_shown_refused_then_resumed(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="finished")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        got = await cancelled_turn(s, "s", "build it", gate)
        # before: 404 for a session whose only turn is pending
        assert got["messages"] == [] and got["busy"] is False
        pending = got["pending_turn"]
        assert pending["reason"] == "cancelled" and pending["cancel_mode"] == "after_tools"
        assert pending["input"] == "build it" and pending["iteration"] == 1
        assert pending["pending_tools"] == [] and pending["turn_id"].startswith("turn_")
        r = await s.client.post("/v1/sessions/s/messages", json={"text": "other"})
        assert r.status_code == 409
        error = r.json()["error"]
        assert "POST /v1/sessions/s/resume" in error and "DELETE /v1/sessions/s/pending_turn" \
            in error and '"discard_pending": true' in error and "loop." not in error
        r = await s.client.post("/v1/sessions/s/resume")
        assert r.status_code == 202 and r.json()["action"] == "resumed"
        assert r.json()["turn_id"] != pending["turn_id"]
        await s.runner._driver("s").wait_idle()  # the resumed turn and what follows it
        got = (await s.client.get("/v1/sessions/s")).json()
        assert got["pending_turn"] is None
        assert [(m["role"], m["content"]) for m in got["messages"]][-1] == \
            ("assistant", "finished")
        assert users(got) == ["build it"]
        for method, path in (("POST", "resume"), ("DELETE", "pending_turn")):
            r = await s.client.request(method, f"/v1/sessions/s/{path}")
            assert r.status_code == 404 and "no pending turn" in r.json()["error"]
        assert (await s.client.get("/v1/sessions/never")).status_code == 404


async def test_discard_drops_the_turn_and_the_session_takes_messages_again(
        tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [echo, Reply(tool_calls=[("work", {"step": "a"})]), echo,
              Reply(tool_calls=[("work", {"step": "b"})]), echo]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        assert (await s.client.post("/v1/sessions/d/messages", json={"text": "hello"})
                ).status_code == 202
        await s.loop.wait_session("d")
        got = await cancelled_turn(s, "d", "doomed", gate)
        assert got["pending_turn"]["input"] == "doomed" and users(got) == ["hello"]
        assert (await s.client.delete("/v1/sessions/d/pending_turn")).json() == {"ok": True}
        got = (await s.client.get("/v1/sessions/d")).json()
        assert got["pending_turn"] is None and users(got) == ["hello"]
        assert (await s.client.post("/v1/sessions/d/messages", json={"text": "next"})
                ).status_code == 202
        await s.loop.wait_session("d")
        # the same in one call: "discard_pending" drops it and sends
        await cancelled_turn(s, "d", "doomed too", gate)
        r = await s.client.post("/v1/sessions/d/messages",
                                json={"text": "instead", "discard_pending": True})
        assert r.status_code == 202 and r.json()["action"] == "started"
        await s.loop.wait_session("d")
        got = (await s.client.get("/v1/sessions/d")).json()
        assert users(got) == ["hello", "next", "instead"] and got["pending_turn"] is None
        assert got["messages"][-1]["content"] == "re: instead"
        r = await s.client.post("/v1/sessions/d/messages",
                                json={"text": "x", "discard_pending": "yes"})
        assert r.status_code == 400 and "discard_pending" in r.json()["error"]


async def test_a_running_turn_is_neither_resumed_nor_discarded(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="done")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        await s.client.post("/v1/sessions/b/messages", json={"text": "go"})
        await asyncio.wait_for(sse_events(s.client, "b", until="tool_exec_start"), 10)
        got = (await s.client.get("/v1/sessions/b")).json()
        assert got["busy"] is True and got["pending_turn"] is None  # its checkpoint is live
        for method, path in (("POST", "resume"), ("DELETE", "pending_turn")):
            r = await s.client.request(method, f"/v1/sessions/b/{path}")
            assert r.status_code == 409 and "busy" in r.json()["error"]
        gate.set()
        await s.loop.wait_session("b")
        assert (await s.client.get("/v1/sessions/b")).json()["messages"][-1]["content"] == "done"


async def test_an_unreadable_pending_turn_is_shown_and_can_be_dropped(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), echo]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        await cancelled_turn(s, "u", "first", gate)
        path = s.loop.store.checkpoint_path("u")
        path.write_text("not a checkpoint\n")
        got = (await s.client.get("/v1/sessions/u")).json()
        assert path.name in got["pending_turn"]["error"]
        r = await s.client.post("/v1/sessions/u/messages", json={"text": "second"})
        assert r.status_code == 409
        assert (await s.client.delete("/v1/sessions/u/pending_turn")).json() == {"ok": True}
        assert not path.exists()
        assert (await s.client.post("/v1/sessions/u/messages", json={"text": "second"})
                ).status_code == 202
        await s.loop.wait_session("u")
        assert users((await s.client.get("/v1/sessions/u")).json()) == ["second"]
