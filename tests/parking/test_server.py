"""The server's requests API over parked turns: list, answer (checked, once), resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

from steerable import Reply, ToolContext, tool
from tests.server.conftest import gate_tools, serving, sse_events


@tool(read_only=True)
async def size(ctx: ToolContext) -> str:
    """Ask for a size."""
    return f"size {await ctx.ask('How big?', schema={'type': 'integer', 'maximum': 10})}"


async def _parked(s, sid: str, text: str) -> list[dict]:
    after = s.runner.hub.cursor(sid)
    r = await s.client.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert r.status_code == 202
    events = await asyncio.wait_for(sse_events(s.client, sid, last_event_id=after), 10)
    assert events[-1]["status"] == "waiting"
    return events


async def test_a_parked_approval_is_listed_answered_once_and_resumed(tmp_path: Path) -> None:
    written: dict[str, str] = {}
    script = [Reply(tool_calls=[("write", {"path": "a", "content": "x"})]), Reply(text="done")]
    async with serving(tmp_path, script, gate_tools(asyncio.Event(), written), approvals=True,
                       park=True) as s:
        events = await _parked(s, "s1", "write a")
        rid = next(e for e in events if e["kind"] == "approval_requested")["request_id"]
        listed = (await s.client.get("/v1/requests")).json()["requests"]
        assert [(r["request_id"], r["kind"], r["session_id"], r["arguments"]) for r in listed] \
            == [(rid, "approval", "s1", {"path": "a", "content": "x"})]
        assert (await s.client.get("/v1/requests?session_id=other")).json() == {"requests": []}
        session = (await s.client.get("/v1/sessions/s1")).json()
        assert session["pending_turn"]["reason"] == "waiting"
        assert [r["request_id"] for r in session["pending_turn"]["waiting"]] == [rid]
        refused = await s.client.post("/v1/sessions/s1/messages", json={"text": "hello?"})
        assert refused.status_code == 409 and "/v1/requests" in refused.json()["error"]

        assert (await s.client.post(f"/v1/requests/{rid}", json={"value": "yes"})).status_code \
            == 400  # an approval takes {"approved"}
        assert (await s.client.post(f"/v1/requests/{rid}", json={})).status_code == 400
        after = s.runner.hub.cursor("s1")
        r = await s.client.post(f"/v1/requests/{rid}", json={"approved": True})
        assert r.status_code == 200 and r.json()["ok"] and r.json()["turn_id"]
        events = await asyncio.wait_for(sse_events(s.client, "s1", last_event_id=after), 10)
        assert events[0]["turn_id"] == r.json()["turn_id"] and events[-1]["status"] == "completed"
        assert written == {"a": "x"}
        again = await s.client.post(f"/v1/requests/{rid}", json={"approved": False})
        assert again.status_code == 409 and "answered already" in again.json()["error"]
        forged = await s.client.post("/v1/requests/approval_" + "A" * 22,
                                     json={"approved": True})
        assert forged.status_code == 404
        assert (await s.client.get("/v1/requests")).json() == {"requests": []}


async def test_a_parked_question_refuses_a_bad_value_and_stays_listed(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("size", {})]), Reply(text="ok")]
    async with serving(tmp_path, script, [size], park=True) as s:
        events = await _parked(s, "s2", "how big")
        asked = next(e for e in events if e["kind"] == "question_asked")
        assert asked["schema"] == {"type": "integer", "maximum": 10}
        rid = asked["request_id"]
        for bad in ("3", 11, None):
            r = await s.client.post(f"/v1/requests/{rid}", json={"value": bad})
            assert r.status_code == 400, r.text
        listed = (await s.client.get("/v1/requests")).json()["requests"]
        assert [(x["request_id"], x["question"]) for x in listed] == [(rid, "How big?")]
        after = s.runner.hub.cursor("s2")
        r = await s.client.post(f"/v1/requests/{rid}", json={"value": 7})
        assert r.status_code == 200
        events = await asyncio.wait_for(sse_events(s.client, "s2", last_event_id=after), 10)
        assert [e["content"] for e in events if e["kind"] == "tool_exec_end"] == ["size 7"]
