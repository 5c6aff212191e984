"""The CLI without a terminal: a run leaves its turn waiting (exit 5) and says how to answer;
``steerable answer`` / ``approve`` / ``deny`` resume it in another process; ``waiting`` lists."""

from __future__ import annotations

import json
from pathlib import Path

from tests.coding.test_cli import script, steerable


def _events(out: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in out.splitlines()]


def test_a_parked_question_is_answered_by_another_process(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ask = [{"tool_calls": [["ask_user", {"question": "Which name?", "choices": ["ada", "bob"]}]]}]
    res = steerable(cli_env, "run", "name it", "--json", "--provider", "scripted",
                    "--script", script(tmp_path, ask), "--workspace", str(ws))
    assert res.returncode == 5, res.stderr
    asked = next(e for e in _events(res.stdout) if e["kind"] == "question_asked")
    rid = asked["request_id"]
    assert asked["choices"] == ["ada", "bob"]
    assert f"steerable answer {rid} VALUE" in res.stderr and "Which name? [ada / bob]" in res.stderr

    listed = steerable(cli_env, "waiting", "--json")
    assert [json.loads(x)["request_id"] for x in listed.stdout.splitlines()] == [rid]

    bad = steerable(cli_env, "answer", rid, "carol", "--provider", "scripted",
                    "--script", script(tmp_path, []), "--workspace", str(ws))
    assert bad.returncode == 2 and "not one of the choices" in bad.stderr

    done = [{"text": "Named it ada."}]
    res = steerable(cli_env, "answer", rid, "ada", "--json", "--provider", "scripted",
                    "--script", script(tmp_path, done), "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    events = _events(res.stdout)
    assert events[0]["kind"] == "turn_start" and events[0]["resumed_from"]
    assert [e["value"] for e in events if e["kind"] == "question_answered"] == ["ada"]
    end = next(e for e in events if e["kind"] == "tool_exec_end")
    assert end["content"] == "The user answered: ada"
    assert events[-1]["status"] == "completed" and events[-1]["text"] == "Named it ada."

    again = steerable(cli_env, "answer", rid, "bob", "--provider", "scripted",
                      "--script", script(tmp_path, []), "--workspace", str(ws))
    assert again.returncode == 2 and "answered already" in again.stderr
    assert steerable(cli_env, "waiting").stdout.strip() == "nothing waits for an answer"


def test_approve_and_deny_resume_the_turn(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write = [{"tool_calls": [["write", {"path": "b.txt", "content": "x"}]]}]
    res = steerable(cli_env, "run", "write b", "--json", "--provider", "scripted",
                    "--script", script(tmp_path, write), "--workspace", str(ws))
    assert res.returncode == 5
    rid = next(e for e in _events(res.stdout) if e["kind"] == "approval_requested")["request_id"]
    assert f"steerable approve {rid}" in res.stderr and f"steerable deny {rid}" in res.stderr
    res = steerable(cli_env, "deny", rid, "--reason", "not today", "--provider", "scripted",
                    "--script", script(tmp_path, [{"text": "Left it."}]), "--workspace", str(ws))
    assert res.returncode == 4, res.stderr  # the one action asked for was denied
    assert not (ws / "b.txt").exists() and "not today" in res.stderr

    res = steerable(cli_env, "run", "write b", "--json", "--provider", "scripted",
                    "--script", script(tmp_path, write), "--workspace", str(ws))
    rid = next(e for e in _events(res.stdout) if e["kind"] == "approval_requested")["request_id"]
    res = steerable(cli_env, "approve", rid, "--provider", "scripted",
                    "--script", script(tmp_path, [{"text": "Wrote it."}]), "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    assert (ws / "b.txt").read_text() == "x" and "Wrote it." in res.stdout
    unknown = steerable(cli_env, "approve", "approval_" + "x" * 22, "--workspace", str(ws))
    assert unknown.returncode == 2 and "no waiting request" in unknown.stderr
