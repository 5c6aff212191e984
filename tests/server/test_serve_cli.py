"""``steerable serve`` as a process: the listening line, the token rule, a clean exit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.coding.conftest import cli_env  # noqa: F401 (fixture)


def start(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "served"}]))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "steerable", "serve", "--port", "0",
                             "--provider", "scripted", "--script", str(script), "--workspace",
                             str(ws), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def listening(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on http://127.0.0.1:"), (line, proc.stderr)
    return line.split()[-1]


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return out, err


def test_serve_prints_where_it_listens_and_runs_a_turn(cli_env, tmp_path: Path) -> None:  # noqa: F811
    proc = start(cli_env, tmp_path)
    try:
        url = listening(proc)
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/healthz").json() == {"ok": True}
            r = client.post("/v1/sessions/cli-1/messages", json={"text": "hello"})
            assert r.status_code == 202
            with client.stream("GET", "/v1/sessions/cli-1/events",
                               headers={"Last-Event-ID": "0"}) as events:
                for line in events.iter_lines():
                    if line.startswith("data:") and '"turn_end"' in line:
                        assert json.loads(line[5:])["status"] == "completed"
                        break
            got = client.get("/v1/sessions/cli-1").json()
            assert [m["content"] for m in got["messages"]] == ["hello", "served"]
    finally:
        _, err = stop(proc)
    sessions = Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions"
    assert (sessions / "cli-1.jsonl").exists()  # sessions live on disk like the CLI's
    assert "Traceback" not in err


def test_off_loopback_needs_a_token(cli_env, tmp_path: Path) -> None:  # noqa: F811
    res = subprocess.run([sys.executable, "-m", "steerable", "serve", "--host", "0.0.0.0",
                          "--port", "0", "--provider", "scripted"], env=cli_env,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and res.stdout == ""
    assert "STEERABLE_SERVER_TOKEN" in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize("host", ["127.0.0.1"])
def test_a_token_from_the_environment_guards_every_api_call(cli_env, tmp_path: Path,  # noqa: F811
                                                            host: str) -> None:
    token = "tok-" + "x" * 20
    proc = start({**cli_env, "STEERABLE_SERVER_TOKEN": token}, tmp_path, "--host", host)
    try:
        url = listening(proc)
        assert httpx.get(url + "/v1/sessions").status_code == 401
        ok = httpx.get(url + "/v1/sessions", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        page = httpx.get(url + "/")
        assert page.status_code == 200 and token not in page.text
    finally:
        out, err = stop(proc)
    assert token not in out and token not in err
