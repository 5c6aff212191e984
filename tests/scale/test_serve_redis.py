"""``steerable serve --redis``: two server processes sharing sessions through a real Redis."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests._redis import RedisServer
from tests.coding.conftest import cli_env  # noqa: F401 (fixture)
from tests.server.test_serve_cli import listening, start, stop

pytestmark = pytest.mark.timeout(120)


def follow(client: httpx.Client, session: str, last_id: str = "0") -> list[tuple[int, dict]]:
    seen = []
    with client.stream("GET", f"/v1/sessions/{session}/events",
                       headers={"Last-Event-ID": last_id}) as events:
        event_id = 0
        for line in events.iter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:])
            if line.startswith("data:"):
                data = json.loads(line[5:])
                seen.append((event_id, data))
                if data["kind"] == "turn_end":
                    return seen
    return seen


def test_two_servers_share_sessions_and_redis_down_is_503(cli_env, tmp_path: Path,  # noqa: F811
                                                          own_redis: RedisServer) -> None:
    env = {**cli_env, "STEERABLE_REDIS_URL": own_redis.url}
    a = start(env, tmp_path)
    b = start(cli_env, tmp_path, "--redis", own_redis.url)
    try:
        url_a, url_b = listening(a), listening(b)
        with httpx.Client(base_url=url_a, timeout=10) as ca, \
                httpx.Client(base_url=url_b, timeout=10) as cb:
            r = ca.post("/v1/sessions/shared/messages", json={"text": "hello"})
            assert r.status_code == 202 and r.json()["action"] == "started"
            events = follow(cb, "shared")  # followed on B, whichever process ran it
            assert events[-1][1]["status"] == "completed"
            ids = [i for i, _ in events]
            assert ids == sorted(ids) and len(set(ids)) == len(ids) and ids[0] > 2**40
            # A reconnect with Last-Event-ID (on the other process) gets what came after.
            again = follow(ca, "shared", str(ids[0]))
            assert [i for i, _ in again] == ids[1:]
            got = cb.get("/v1/sessions/shared").json()
            assert [m["content"] for m in got["messages"]] == ["hello", "served"]
            # The worker lets the session go only after its TURN_END is in the stream (the
            # fence against zombie workers), so "busy" may trail the event by a moment.
            for _ in range(100):
                if not got["busy"]:
                    break
                time.sleep(0.05)
                got = cb.get("/v1/sessions/shared").json()
            assert got["busy"] is False
            assert [s["id"] for s in ca.get("/v1/sessions").json()["sessions"]] == ["shared"]
            own_redis.stop()
            r = cb.post("/v1/sessions/other/messages", json={"text": "anyone?"})
            assert r.status_code == 503 and "nothing was queued" in r.json()["error"]
    finally:
        own_redis.stop()
        for proc in (a, b):
            stop(proc)


def test_a_bad_redis_url_is_refused_in_one_line(cli_env, tmp_path: Path) -> None:  # noqa: F811
    proc = start(cli_env, tmp_path, "--redis", "http://nope")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "redis://HOST:PORT/DB" in err and "Traceback" not in err
