"""The JSON API through a real server on loopback: every endpoint and status code, the busy
policies over HTTP, approvals, SSE with ``Last-Event-ID`` resume, tokens, bad input."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from steerable import Reply
from tests.server.conftest import gate_tools, serving, sse_events


def echo(request) -> Reply:
    users = [m.content for m in request.messages if m.role == "user"]
    return Reply(text=f"re: {users[-1]}")


async def wait_kind(served, sid: str, kind: str, after: int = 0) -> dict:
    events = await asyncio.wait_for(sse_events(served.client, sid, until=kind,
                                               last_event_id=after), 10)
    return events[-1]


async def test_send_stream_read_list_delete(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="hello there")]) as s:
        assert (await s.client.get("/healthz")).json() == {"ok": True}
        r = await s.client.post("/v1/sessions/s1/messages", json={"text": "hi"})
        assert r.status_code == 202
        body = r.json()
        assert body["action"] == "started" and body["turn_id"].startswith("turn_")
        ids: list[int] = []
        events = await sse_events(s.client, "s1", ids=ids)
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "turn_start" and kinds[-1] == "turn_end" and "llm_delta" in kinds
        assert ids == sorted(ids) and events[-1]["status"] == "completed"
        assert "".join(e["text"] for e in events if e["kind"] == "llm_delta") == "hello there"
        await s.loop.wait_session("s1")
        got = (await s.client.get("/v1/sessions/s1")).json()
        assert got["id"] == "s1" and got["busy"] is False
        assert [(m["role"], m["content"]) for m in got["messages"]] == [
            ("user", "hi"), ("assistant", "hello there")]
        listed = (await s.client.get("/v1/sessions")).json()["sessions"]
        assert [x["id"] for x in listed] == ["s1"] and listed[0]["messages"] == 2
        assert (await s.client.delete("/v1/sessions/s1")).json() == {"ok": True}
        assert (await s.client.get("/v1/sessions/s1")).status_code == 404
        assert (await s.client.delete("/v1/sessions/s1")).status_code == 404
        assert (await s.client.get("/v1/sessions")).json() == {"sessions": []}
        assert (await s.client.get("/nope")).status_code == 404
        assert (await s.client.put("/v1/sessions/s1/messages")).status_code == 405


@pytest.mark.parametrize(("policy", "action", "status"), [
    ("steer", "steered", "completed"), ("follow_up", "queued", "completed"),
    ("interrupt", "interrupted", "interrupted"), ("rollback", "rolled_back", "aborted")])
async def test_busy_policies_over_http(tmp_path: Path, policy: str, action: str,
                                       status: str) -> None:
    gate = asyncio.Event()
    tools = gate_tools(gate, {})
    script = [Reply(tool_calls=[("work", {"step": "a"})]), echo, echo]
    async with serving(tmp_path, script, tools) as s:
        sub = s.loop.subscribe(buffer=10_000)
        first = (await s.client.post("/v1/sessions/s/messages", json={"text": "go"})).json()
        await wait_kind(s, "s", "tool_exec_start")
        r = await s.client.post("/v1/sessions/s/messages", json={"text": "next", "policy": policy})
        assert r.status_code == 202 and r.json()["action"] == action
        if policy == "steer":
            assert r.json()["turn_id"] == first["turn_id"]
        else:
            assert r.json()["turn_id"] is None
        assert (await s.client.get("/v1/sessions/s")).json()["busy"] is True
        gate.set()
        await s.loop.wait_session("s")
        ends = [e.status.value for e in sub.drain_nowait() if e.kind.value == "turn_end"]
        assert ends == [status, "completed"] if policy != "steer" else ends == [status]
        users = [m["content"] for m in (await s.client.get("/v1/sessions/s")).json()["messages"]
                 if m["role"] == "user"]
        assert users[-1] == "next"
        if policy == "rollback":
            assert users == ["next"]  # nothing of the aborted turn was saved


async def test_reject_is_409_and_queues_nothing(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), echo]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        await s.client.post("/v1/sessions/s/messages", json={"text": "go"})
        await wait_kind(s, "s", "tool_exec_start")
        r = await s.client.post("/v1/sessions/s/messages", json={"text": "x", "policy": "reject"})
        assert r.status_code == 409 and "busy" in r.json()["error"]
        assert (await s.client.get("/v1/sessions/s")).json()["queued"] == []
        gate.set()
        await s.loop.wait_session("s")


async def test_control_endpoints(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="summed up"), echo,
              Reply(tool_calls=[("work", {"step": "b"})]), Reply(tool_calls=[("work", {"step": "c"})])]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        c = s.client
        # nothing runs: every control says ok=false; a refused message still has an id
        for path in ("steer", "follow_up"):
            got = (await c.post(f"/v1/sessions/s/{path}", json={"text": "x"})).json()
            assert got["ok"] is False and got["state"] == "rejected", path
            assert got["message_id"].startswith("msg_") and got["detail"] == "no turn is active"
        for path, body in [("interrupt", {"mode": "graceful"}), ("interrupt", {"mode": "hard"}),
                           ("cancel", {"mode": "immediate"})]:
            r = await c.post(f"/v1/sessions/s/{path}", json=body)
            assert (r.status_code, r.json()) == (200, {"ok": False}), path
        await c.post("/v1/sessions/s/messages", json={"text": "go"})
        await wait_kind(s, "s", "tool_exec_start")
        for path, text in (("steer", "look"), ("follow_up", "later")):
            got = (await c.post(f"/v1/sessions/s/{path}", json={"text": text})).json()
            assert got["ok"] is True and got["state"] == "queued", path
            assert got["message_id"].startswith("msg_")
        assert (await c.post("/v1/sessions/s/interrupt", json={"mode": "graceful"})).json() == \
            {"ok": True}
        assert (await c.post("/v1/sessions/s/interrupt", json={"mode": "graceful"})).json() == \
            {"ok": False}  # a repeated call changes nothing
        gate.set()
        await s.loop.wait_session("s")
        users = [m["content"] for m in (await c.get("/v1/sessions/s")).json()["messages"]
                 if m["role"] == "user"]
        assert users[-1] == "later"  # the follow-up ran as its own turn
        gate.clear()
        await c.post("/v1/sessions/s/messages", json={"text": "again"})
        await wait_kind(s, "s", "tool_exec_start", after=s.runner.hub.cursor("s"))
        r = await c.post("/v1/sessions/s/cancel", json={"mode": "immediate"})
        assert r.json() == {"ok": True}
        await s.loop.wait_session("s")
        gate.clear()
        await c.post("/v1/sessions/s/messages", json={"text": "third"})
        started = await wait_kind(s, "s", "tool_exec_start", after=s.runner.hub.cursor("s"))
        r = await c.post("/v1/sessions/s/cancel", json={"mode": "after_tools"})
        assert r.json() == {"ok": True}
        gate.set()
        end = await wait_kind(s, "s", "turn_end", after=started["seq"])
        assert end["status"] == "cancelled"
        await s.loop.wait_session("s")
        # a cancelled turn leaves a checkpoint: a new message is a conflict until it is resumed
        r = await c.post("/v1/sessions/s/messages", json={"text": "more"})
        assert r.status_code == 409 and "error" in r.json()
        for bad in [{"mode": "gently"}, {}, {"mode": 3}]:
            assert (await c.post("/v1/sessions/s/interrupt", json=bad)).status_code == 400
            assert (await c.post("/v1/sessions/s/cancel", json=bad)).status_code == 400


async def test_approve_a_write_and_deny_another(tmp_path: Path) -> None:
    written: dict[str, str] = {}
    script = [Reply(tool_calls=[("write", {"path": "a.txt", "content": "A"})]),
              Reply(tool_calls=[("write", {"path": "b.txt", "content": "B"})]), Reply(text="ok")]
    async with serving(tmp_path, script, gate_tools(asyncio.Event(), written),
                       approvals=True) as s:
        c = s.client
        await c.post("/v1/sessions/s/messages", json={"text": "write two"})
        asked = await wait_kind(s, "s", "approval_requested")
        assert asked["tool_name"] == "write" and asked["arguments"]["path"] == "a.txt"
        r = await c.post(f"/v1/approvals/{asked['request_id']}", json={"approved": True})
        assert r.json() == {"ok": True}
        again = await c.post(f"/v1/approvals/{asked['request_id']}", json={"approved": True})
        assert again.json() == {"ok": False}  # answered already
        second = await wait_kind(s, "s", "approval_requested", after=asked["seq"])
        r = await c.post(f"/v1/approvals/{second['request_id']}",
                         json={"approved": False, "reason": "not b"})
        assert r.json() == {"ok": True}
        await s.loop.wait_session("s")
        assert written == {"a.txt": "A"}
        bad = await c.post(f"/v1/approvals/{second['request_id']}", json={"approved": "yes"})
        assert bad.status_code == 400
        assert (await c.post("/v1/approvals/nope", json={"approved": True})).json() == \
            {"ok": False}


async def test_last_event_id_resumes_without_gaps(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(text="first part", tool_calls=[("work", {"step": "a"})]),
              Reply(text="second part of the answer")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        await s.client.post("/v1/sessions/s/messages", json={"text": "go"})
        head = await asyncio.wait_for(sse_events(s.client, "s", until="tool_exec_start"), 10)
        gate.set()
        await s.loop.wait_session("s")
        rest = await asyncio.wait_for(
            sse_events(s.client, "s", last_event_id=head[-1]["seq"]), 10)
        seqs = [e["seq"] for e in head + rest]
        assert seqs == list(range(seqs[0], seqs[-1] + 1))  # nothing missed, nothing twice
        assert rest[-1]["kind"] == "turn_end"
        # a client that keeps up: the same stream live from the start
        whole = await asyncio.wait_for(sse_events(s.client, "s", last_event_id=0), 10)
        assert [e["seq"] for e in whole] == seqs
        bad = await s.client.get("/v1/sessions/s/events", headers={"Last-Event-ID": "x"})
        assert bad.status_code == 400


async def test_a_client_that_disconnects_leaves_nothing_behind(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="done")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        await s.client.post("/v1/sessions/s/messages", json={"text": "go"})
        for _ in range(5):
            await asyncio.wait_for(sse_events(s.client, "s", until="tool_exec_start"), 10)
        for _ in range(100):
            if s.runner.hub.client_count() == 0:
                break
            await asyncio.sleep(0.02)
        assert s.runner.hub.client_count() == 0
        gate.set()
        await s.loop.wait_session("s")


@pytest.mark.parametrize(("path", "body", "status"), [
    ("/v1/sessions/s/messages", b"{bad json", 400),
    ("/v1/sessions/s/messages", b"[1, 2]", 400),
    ("/v1/sessions/s/messages", b'{"text": 5}', 400),
    ("/v1/sessions/s/messages", b'{"text": "  "}', 400),
    ("/v1/sessions/s/messages", b'{"nope": "x"}', 400),
    ("/v1/sessions/s/messages", b'{"text": "x", "policy": "shout"}', 400),
    ("/v1/sessions/s/messages", b'{"text": "x", "policy": 1}', 400),
    ("/v1/sessions/s/messages", b'{"text": "' + b"x" * 70_000 + b'"}', 413),
    ("/v1/sessions/..%2Fx/messages", b'{"text": "x"}', 404),
    ("/v1/sessions/../messages", b'{"text": "x"}', 404),
    ("/v1/sessions/.hidden/messages", b'{"text": "x"}', 400),
    ("/v1/sessions/a%00b/messages", b'{"text": "x"}', 400),
    ("/v1/sessions/" + "a" * 200 + "/messages", b'{"text": "x"}', 400),
    ("/v1/sessions/a%20b/steer", b'{"text": "x"}', 400),
])
async def test_bad_input_is_a_4xx_with_a_json_error_and_writes_nothing(
        tmp_path: Path, path: str, body: bytes, status: int) -> None:
    async with serving(tmp_path, [Reply(text="never")]) as s:
        r = await s.client.post(path, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == status, r.text
        assert "error" in r.json()
        assert not s.store_dir.exists() or not any(s.store_dir.iterdir())
        assert s.provider.requests == []


async def test_chunked_oversized_body_is_refused(tmp_path: Path) -> None:
    async def chunks():
        for _ in range(20):
            yield b"x" * 8192

    async with serving(tmp_path, [Reply(text="never")]) as s:
        # (the messages endpoint takes up to 32 MB, for attachments: the others 64 KB)
        r = await s.client.post("/v1/sessions/s/steer", content=chunks())
        assert r.status_code == 413 and s.provider.requests == []


async def test_token_required_when_set_and_compared_exactly(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="ok")], token="s3cret-token-123") as s:
        assert (await s.client.get("/v1/sessions")).status_code == 200
        assert (await s.client.get("/healthz")).status_code == 200
        import httpx

        async with httpx.AsyncClient(base_url=s.url) as anon:
            for headers in [{}, {"Authorization": "Bearer wrong"},
                            {"Authorization": "Basic s3cret-token-123"},
                            {"Authorization": "Bearer s3cret-token-1234"}]:
                for method, path in [("GET", "/v1/sessions"), ("GET", "/healthz"),
                                     ("POST", "/v1/sessions/s/messages"),
                                     ("GET", "/v1/sessions/s/events")]:
                    r = await anon.request(method, path, headers=headers, json={"text": "x"})
                    assert r.status_code == 401, (method, path, headers)
                    assert "s3cret" not in r.text
            page = await anon.get("/")  # the page itself carries no data: it loads without
            assert page.status_code == 200 and "s3cret" not in page.text
            # ...and so does every file it loads, and every file of the static folder.
            import re
            from importlib.resources import files

            linked = re.findall(r'(?:src|href)="(/static/[^"]+|/favicon.svg)"', page.text)
            shipped = [f"/static/{f.name}" for f in files("steerable.server").joinpath(
                "static").iterdir() if f.name not in ("index.html", "favicon.svg")]
            assert len(linked) >= 8
            for path in {*linked, *shipped}:
                assert (await anon.get(path)).status_code == 200, path
        assert s.provider.requests == []


async def test_cross_site_posts_are_refused(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="ok")]) as s:
        for headers in [{"Origin": "http://evil.example"},
                        {"Origin": "null"},
                        {"Sec-Fetch-Site": "cross-site"}]:
            r = await s.client.post("/v1/sessions/s/messages", json={"text": "x"},
                                    headers=headers)
            assert r.status_code == 403, headers
            assert "access-control-allow-origin" not in r.headers
        same = await s.client.post("/v1/sessions/s/messages", json={"text": "x"},
                                   headers={"Origin": s.url, "Sec-Fetch-Site": "same-origin"})
        assert same.status_code == 202
        await s.loop.wait_session("s")


async def test_page_and_assets_are_served_locally(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="ok")]) as s:
        page = await s.client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        for asset in ("/static/app.js", "/static/app.css", "/favicon.svg"):
            r = await s.client.get(asset)
            assert r.status_code == 200 and len(r.content) > 100, asset
        assert "http://" not in page.text and "https://" not in page.text  # no CDN
        assert (await s.client.get("/static/../pyproject.toml")).status_code == 404
        assert (await s.client.get("/static/secret.py")).status_code == 404
