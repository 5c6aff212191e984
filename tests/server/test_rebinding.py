"""A page that re-points its own host name at 127.0.0.1 (DNS rebinding) cannot drive a
token-less loopback server, nor can a page served by another local port; the server's own page
on a loopback name still can. Requests are sent with the headers such a browser sends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from steerable import Reply
from steerable.server._guard import AccessGuard, is_loopback_name
from tests.server.conftest import gate_tools, serving


def browser(port: int, host: str, origin: str | None) -> dict[str, str]:
    """The headers a browser sends from a page at ``origin`` to ``http://host:port``."""
    headers = {"Host": f"{host}:{port}", "Sec-Fetch-Site": "same-origin"}
    if origin is not None:
        headers["Origin"] = origin
    return headers


async def test_a_rebound_page_can_neither_post_nor_approve_nor_read(tmp_path: Path) -> None:
    gate, written = asyncio.Event(), dict[str, str]()
    script = [Reply(tool_calls=[("write", {"path": "p", "content": "pwned"})]), Reply(text="ok")]
    async with serving(tmp_path, script, gate_tools(gate, written), approvals=True) as s:
        port = int(s.url.rsplit(":", 1)[1])
        evil = browser(port, "attacker.example", f"http://attacker.example:{port}")
        attempts: list[tuple[str, str, dict[str, Any] | None]] = [
            ("POST", "/v1/sessions/s/messages", {"text": "write p"}),
            ("GET", "/v1/sessions", None), ("GET", "/v1/sessions/s", None),
            ("GET", "/v1/sessions/s/events", None), ("GET", "/", None),
            ("DELETE", "/v1/sessions/s", None),
        ]
        for method, path, body in attempts:
            r = await s.client.request(method, path, json=body, headers=evil)
            assert r.status_code == 403, (method, path)
            assert "attacker.example" in r.json()["error"]
        assert s.provider.requests == []

        # A real user starts the call; the rebound page tries to approve it, even with its id.
        mine = {"Origin": s.url, "Sec-Fetch-Site": "same-origin"}
        asked = s.loop.subscribe(kinds=["approval_requested"])  # before the POST: none is missed
        assert (await s.client.post("/v1/sessions/s/messages", json={"text": "write p"},
                                    headers=mine)).status_code == 202
        request_id = await _approval_id(asked)
        for headers in (evil, browser(port, "localhost", f"http://localhost:{port + 1}"),
                        browser(port, "127.0.0.1", "null")):
            r = await s.client.post(f"/v1/approvals/{request_id}", json={"approved": True},
                                    headers=headers)
            assert r.status_code == 403, headers
        assert written == {}
        r = await s.client.post(f"/v1/approvals/{request_id}", json={"approved": False},
                                headers=browser(port, "localhost", f"http://localhost:{port}"))
        assert r.status_code == 200 and r.json() == {"ok": True}
        await s.loop.wait_session("s")
        assert written == {}


async def _approval_id(sub: Any) -> str:
    async for event in sub:
        if event.kind == "approval_requested":
            sub.close()
            return str(event.request_id)
    raise AssertionError("no approval asked")


async def test_loopback_names_and_configured_hosts_are_served(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="ok")] * 2) as s:
        port = int(s.url.rsplit(":", 1)[1])
        for host in ("localhost", "127.0.0.1", "127.5.6.7", "[::1]", "LOCALHOST."):
            r = await s.client.get("/v1/sessions", headers={"Host": f"{host}:{port}"})
            assert r.status_code == 200, host
        for host in ("localhost.attacker.example", "127.0.0.1.nip.io", "0.0.0.0", "",
                     "user@localhost", "10.0.0.1"):
            r = await s.client.get("/v1/sessions", headers={"Host": f"{host}:{port}"})
            assert r.status_code in (400, 403), host


def _guard(**options: Any) -> AccessGuard:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not reached in these checks")

    return AccessGuard(app, token=options.pop("token", None), **options)


def _request(method: str, headers: dict[str, str]) -> Any:
    from starlette.requests import Request

    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": method, "scheme": "http", "path": "/v1/sessions",
                    "query_string": b"", "headers": raw, "server": ("127.0.0.1", 8321)})


@pytest.mark.parametrize(("options", "headers", "allowed"), [
    ({}, browser(8321, "devbox", "http://devbox:8321"), False),
    ({"hosts": ["devbox"]}, browser(8321, "devbox", "http://devbox:8321"), True),
    ({"hosts": ["devbox"]}, browser(8321, "devbox", "http://devbox:9000"), False),
    ({}, browser(8321, "localhost", "http://ide.example"), False),
    ({"origins": ["http://ide.example/"]}, browser(8321, "localhost", "http://ide.example"), True),
    ({}, browser(8321, "localhost", "https://localhost:8321"), False),
    ({}, browser(8321, "localhost", "http://localhost"), False),
    ({}, browser(8321, "localhost", None), True),  # curl, scripts: no Origin
    # With a token the host name is free (a rebound page cannot know the token)...
    ({"token": "t0ken"}, {**browser(8321, "box.example", "http://box.example:8321"),
                          "Authorization": "Bearer t0ken"}, True),
    # ...but the Origin still has to be the request's own.
    ({"token": "t0ken"}, {**browser(8321, "box.example", "http://evil.example:8321"),
                          "Authorization": "Bearer t0ken"}, False),
])
def test_the_allow_lists(options: dict[str, Any], headers: dict[str, str], allowed: bool) -> None:
    refusal = _guard(**options).refuse(_request("POST", headers))
    assert (refusal is None) is allowed, refusal and bytes(refusal.body)


def test_loopback_names() -> None:
    assert all(map(is_loopback_name, ["localhost", "127.0.0.1", "127.255.0.9", "::1", "[::1]"]))
    assert not any(map(is_loopback_name, ["localhost.evil", "example.com", "0.0.0.0", "::",
                                          "192.168.1.1", "", "127.0.0.1.evil"]))


async def test_the_served_page_still_works_through_a_loopback_name(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="ok")]) as s:
        port = int(s.url.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=f"http://localhost:{port}") as local:
            assert (await local.get("/")).status_code == 200
            r = await local.post("/v1/sessions/s/messages", json={"text": "hi"},
                                 headers={"Origin": f"http://localhost:{port}"})
            assert r.status_code == 202
        await s.loop.wait_session("s")
