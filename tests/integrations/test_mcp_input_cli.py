"""What a configured MCP server asks, from the CLI and the server: ``steerable run`` without a
terminal leaves the turn waiting on the server's questions (exit 5), ``steerable answer``
answers them from other processes and the call goes on; on ``steerable serve`` they are listed
and answered at ``/v1/requests``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_cli

pytest.importorskip("mcp", reason="the mcp extra is not installed")

ASKING = Path(__file__).with_name("asking_mcp_server.py")
BOOK = [{"tool_calls": [["mcp__ask__book", {"city": "Oslo"}]]}]


def _configure(env: dict[str, str], marks: Path, era: str) -> None:
    config = Path(env["XDG_CONFIG_HOME"]) / "steerable" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "[permissions]\nallow = [\"mcp__ask__*\"]\n"
        "[mcp_servers.ask]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(ASKING))}, \"{era}\"]\n"
        f"env = {{ MCP_TEST_MARKS = {json.dumps(str(marks))} }}\n")


def _script(tmp_path: Path, name: str, steps: list[dict[str, Any]]) -> list[str]:
    path = tmp_path / name
    path.write_text(json.dumps(steps))
    return ["--provider", "scripted", "--script", str(path), "--workspace", str(tmp_path)]


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_run_waits_on_the_servers_questions_and_answer_goes_on(
        cli_env: dict[str, str], marks: Path, tmp_path: Path) -> None:
    _configure(cli_env, marks, "2026")
    res = run_cli(cli_env, "run", "book it", "--json", *_script(tmp_path, "a.json", BOOK))
    assert res.returncode == 5, res.stderr
    asked = [e for e in _events(res.stdout) if e["kind"] == "question_asked"]
    assert [q["question"].splitlines()[0] for q in asked] == [
        "MCP server 'ask' asks: Which date do you travel to Oslo?",
        "MCP server 'ask' asks: How many seats?"]
    date, seats = (q["request_id"] for q in asked)
    assert f"steerable answer {date} VALUE" in res.stderr

    bad = run_cli(cli_env, "answer", seats, '{"seats": "many"}', *_script(tmp_path, "b.json", []))
    assert bad.returncode == 2 and "schema" in bad.stderr  # refused; it stays open
    first = run_cli(cli_env, "answer", date, '{"date": "May 1"}', "--json",
                    *_script(tmp_path, "b.json", []))
    assert first.returncode == 5, first.stderr  # recorded: the seats still wait
    done = run_cli(cli_env, "answer", seats, '{"seats": 2}', "--json",
                   *_script(tmp_path, "c.json", [{"text": "Booked."}]))
    assert done.returncode == 0, done.stderr
    events = _events(done.stdout)
    end = next(e for e in events if e["kind"] == "tool_exec_end")
    assert end["content"] == "booked Oslo on May 1 for 2"
    assert events[-1]["status"] == "completed" and events[-1]["text"] == "Booked."
    assert (marks / "calls").read_text().splitlines() == ["book Oslo May 1 2"]


def test_a_2025_server_declined_from_another_process(
        cli_env: dict[str, str], marks: Path, tmp_path: Path) -> None:
    _configure(cli_env, marks, "2025")
    res = run_cli(cli_env, "run", "book it", "--json", *_script(tmp_path, "a.json", BOOK))
    assert res.returncode == 5, res.stderr
    [date] = [e["request_id"] for e in _events(res.stdout) if e["kind"] == "question_asked"]
    nxt = run_cli(cli_env, "answer", date, "decline", "--json", *_script(tmp_path, "b.json", []))
    assert nxt.returncode == 5, nxt.stderr  # the re-run call declined; the server asks on
    [seats] = [e for e in _events(nxt.stdout) if e["kind"] == "question_asked"]
    assert "How many seats?" in seats["question"]
    done = run_cli(cli_env, "answer", seats["request_id"], "decline", "--json",
                   *_script(tmp_path, "c.json", [{"text": "Not booked."}]))
    assert done.returncode == 0, done.stderr
    end = next(e for e in _events(done.stdout) if e["kind"] == "tool_exec_end")
    assert end["content"] == "not booked (decline, decline)"


def test_the_server_lists_and_answers_them(cli_env: dict[str, str], marks: Path,
                                          tmp_path: Path) -> None:
    import httpx

    _configure(cli_env, marks, "2026")
    proc = subprocess.Popen([sys.executable, "-m", "steerable", "serve", "--port", "0",
                             *_script(tmp_path, "a.json", [*BOOK, {"text": "Booked."}])],
                            env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), proc.stderr
        with httpx.Client(base_url=line.split()[-1], timeout=20) as client:
            assert client.post("/v1/sessions/b1/messages", json={"text": "go"}).status_code == 202
            with client.stream("GET", "/v1/sessions/b1/events",
                               headers={"Last-Event-ID": "0"}) as events:
                asked = 0
                for raw in events.iter_lines():
                    asked += raw.startswith("data:") and '"question_asked"' in raw
                    if asked == 2:
                        break
            listed = client.get("/v1/requests", params={"session_id": "b1"}).json()["requests"]
            by_text = {r["question"].split("asks: ")[1].split("?")[0]: r for r in listed}
            date = by_text["Which date do you travel to Oslo"]
            assert date["schema"]["anyOf"][0]["properties"]["date"]["type"] == "string"
            refused = client.post(f"/v1/requests/{date['request_id']}", json={"value": 5})
            assert refused.status_code == 400
            for text, value in (("Which date do you travel to Oslo", {"date": "May 3"}),
                                ("How many seats", {"seats": 1})):
                got = client.post(f"/v1/requests/{by_text[text]['request_id']}",
                                  json={"value": value})
                assert got.status_code == 200, got.text
            with client.stream("GET", "/v1/sessions/b1/events",
                               headers={"Last-Event-ID": "0"}) as events:
                for raw in events.iter_lines():
                    if raw.startswith("data:") and '"completed"' in raw and '"turn_end"' in raw:
                        break
            messages = client.get("/v1/sessions/b1").json()["messages"]
        assert "booked Oslo on May 3 for 1" in [m["content"] for m in messages]
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
