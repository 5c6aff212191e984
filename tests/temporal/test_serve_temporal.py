"""``steerable serve --temporal`` and ``steerable worker --temporal``: the HTTP API over
sessions that run on Temporal, in a server process and a worker process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.coding.conftest import cli_env  # noqa: F401 (fixture)
from tests.scale.test_serve_redis import follow
from tests.server.test_serve_cli import listening, start, stop

pytestmark = pytest.mark.timeout(120)


def slow_script(tmp_path: Path) -> Path:
    """Replies that take a second: time to queue, edit and withdraw a follow-up. Either
    process may run any call, so each has enough."""
    script = tmp_path / "slow-script.json"
    script.write_text(json.dumps([{"text": "served", "delay": 1.0}] * 6))
    return script


def start_worker(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    script = slow_script(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "steerable", "worker", "--provider",
                             "scripted", "--script", str(script), "--workspace", str(ws),
                             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_serve_and_a_worker_run_sessions_on_temporal(cli_env, tmp_path: Path,  # noqa: F811
                                                     temporal_target: str, events_url: str,
                                                     task_queue: str) -> None:
    where = ["--temporal", temporal_target, "--task-queue", task_queue, "--redis", events_url]
    server = start(cli_env, tmp_path, *where, "--script", str(slow_script(tmp_path)))
    worker = start_worker(cli_env, tmp_path, *where)
    try:
        url = listening(server)
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith(f"working for {temporal_target}")
        with httpx.Client(base_url=url, timeout=20) as client:
            r = client.post("/v1/sessions/web-1/messages", json={"text": "hello"})
            assert r.status_code == 202, r.text
            body = r.json()
            assert body["action"] == "started" and body["message_id"].startswith("msg_")
            events = follow(client, "web-1")
            assert events[-1][1]["status"] == "completed"
            ids = [i for i, _ in events]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            again = follow(client, "web-1", str(ids[0]))
            assert [i for i, _ in again] == ids[1:]
            got = client.get("/v1/sessions/web-1").json()
            assert [m["content"] for m in got["messages"]] == ["hello", "served"]
            listed = client.get("/v1/sessions").json()["sessions"]
            assert [s["id"] for s in listed] == ["web-1"] and listed[0]["title"] == "hello"
            assert client.post("/v1/sessions/web-1/steer",
                               json={"text": "late"}).json()["ok"] is False  # nothing runs
            assert client.delete("/v1/sessions/web-1").status_code in (200, 204)
            assert client.get("/v1/sessions/web-1").status_code == 404

            # Queued messages: listed, edited and withdrawn by id, from this process.
            assert client.post("/v1/sessions/web-2/messages",
                               json={"text": "first"}).status_code == 202
            later = client.post("/v1/sessions/web-2/follow_up", json={"text": "then"}).json()
            assert later["ok"] and later["state"] == "queued"
            mid = later["message_id"]
            queued = client.get("/v1/sessions/web-2/queue").json()["messages"]
            assert [(m["message_id"], m["text"]) for m in queued] == [(mid, "then")]
            assert client.patch(f"/v1/messages/{mid}", json={"text": "instead"}).json()["ok"]
            assert client.get("/v1/sessions/web-2/queue").json()["messages"][0]["text"] == \
                "instead"
            assert client.delete(f"/v1/messages/{mid}").json()["ok"] is True
            assert client.delete(f"/v1/messages/{mid}").json()["ok"] is False
            assert client.get("/v1/sessions/web-2/queue").json()["messages"] == []
    finally:
        stop(server)
        worker.send_signal(signal.SIGINT)
        _, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err


def test_serve_temporal_without_redis_is_refused(cli_env, tmp_path: Path) -> None:  # noqa: F811
    proc = start(cli_env, tmp_path, "--temporal", "127.0.0.1:1")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "--redis" in err and "Traceback" not in err


def test_requests_wait_and_are_answered_through_the_api_on_temporal(
        cli_env, tmp_path: Path, temporal_target: str, events_url: str,  # noqa: F811
        task_queue: str) -> None:
    script = tmp_path / "ask-script.json"
    script.write_text(json.dumps([
        {"tool_calls": [["write", {"path": "a.txt", "content": "x"}]]},
        {"tool_calls": [["ask_user", {"question": "Which?", "choices": ["red", "blue"]}]]},
        {"text": "ok"}]))
    where = ["--temporal", temporal_target, "--task-queue", task_queue, "--redis", events_url]
    server = start(cli_env, tmp_path, *where, "--script", str(script))
    try:
        url = listening(server)
        with httpx.Client(base_url=url, timeout=20) as client:
            assert client.post("/v1/sessions/req-1/messages",
                               json={"text": "go"}).status_code == 202
            for kind, answer in (("approval", {"approved": True}), ("question", None)):
                waiting = _listed(client, kind)
                rid = waiting["request_id"]
                assert waiting["session_id"] == "req-1"
                if kind == "question":
                    assert (waiting["question"], waiting["choices"]) == ("Which?",
                                                                          ["red", "blue"])
                    bad = client.post(f"/v1/requests/{rid}", json={"value": "green"})
                    assert bad.status_code == 400, bad.text  # refused; it stays open
                    answer = {"value": "blue"}
                r = client.post(f"/v1/requests/{rid}", json=answer)
                assert r.status_code == 200, r.text
            events = follow(client, "req-1")
            assert events[-1][1]["status"] == "completed"
            got = client.get("/v1/sessions/req-1").json()
            assert [m["content"] for m in got["messages"]][-2:] == [
                "The user answered: blue", "ok"]
            assert client.get("/v1/requests").json()["requests"] == []
            assert (tmp_path / "ws" / "a.txt").read_text() == "x"
    finally:
        stop(server)


def _listed(client: httpx.Client, kind: str) -> dict[str, object]:
    """The one waiting request of ``kind`` (the listing is visibility: it trails a moment)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [r for r in client.get("/v1/requests").json()["requests"]
                 if r["kind"] == kind]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no {kind} was listed")
