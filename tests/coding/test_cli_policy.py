"""The tool policy in ``steerable run`` (scripted model, ``--policy on``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.coding.test_cli import script, steerable


def _kind(k: str) -> dict[str, str]:
    return {"text": json.dumps({"kind": k})}


def test_a_change_request_that_changed_nothing_exits_6(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    steps = [_kind("change"), {"text": json.dumps({"needs": "writing"})}, {"tool_calls": [["read", {"path": "a.txt"}]]},
             {"tool_calls": [["edit", {"path": "a.txt", "old_text": "nope", "new_text": "x"}]]},
             {"tool_calls": [["edit", {"path": "a.txt", "old_text": "nope", "new_text": "y"}]]},
             {"tool_calls": [["edit", {"path": "a.txt", "old_text": "nop", "new_text": "y"}]]},
             {"text": "Done: changed a.txt."}]
    res = steerable(cli_env, "run", "ändere a.txt", "--policy", "on", "--yes", "--provider",
                    "scripted", "--script", script(tmp_path, steps), "--workspace", str(ws))
    assert res.returncode == 6, res.stderr
    assert "nothing was changed" in res.stderr and "✗ nothing was changed" in res.stdout


def test_a_question_cannot_write_even_with_yes_and_invented_facts_are_marked(
        cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "utils.py").write_text("def helper(x):\n    return x * 2\n")
    steps = [_kind("workspace"),
             {"tool_calls": [["write", {"path": "utils.py", "content": "def f(): pass\n"}]]},
             {"tool_calls": [["read", {"path": "utils.py"}]]},
             {"text": "helper has 12 lines."}, {"text": "helper has 12 lines."}]
    res = steerable(cli_env, "run", "Was macht utils.py?", "--json", "--policy", "on", "--yes",
                    "--provider", "scripted", "--script", script(tmp_path, steps),
                    "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    assert (ws / "utils.py").read_text() == "def helper(x):\n    return x * 2\n"
    events = [json.loads(line) for line in res.stdout.splitlines()]
    asked = [(e["purpose"], e["tool_choice"], e["may_call"]) for e in events
             if e["kind"] == "llm_request"]
    assert asked[:2] == [("classify", "none", None),
                         ("", "required", ["read", "grep", "ls", "find"])]  # todo reads nothing
    assert ("evidence", "none", None) in asked
    assert "⚠ unverified: 12" in events[-1]["text"]


def test_a_change_request_answered_with_instructions_after_a_command_exits_6(
        cli_env, tmp_path: Path) -> None:
    # bash succeeded (it only read), the model then wrote instructions: nothing changed, and the
    # run says so and fails, though a tool that is not read-only ran without error.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    steps = [_kind("change"), {"text": json.dumps({"needs": "writing"})}, {"tool_calls": [["bash", {"command": "cat calc.py"}]]},
             {"tool_calls": [["bash", {"command": "cat calc.py"}]]},
             {"tool_calls": [["edit", {"path": "calc.py", "old_text": "a-b", "new_text": "a+b"}]]},
             {"text": "Replace a - b with a + b in calc.py and it will work."}]
    res = steerable(cli_env, "run", "fix calc.py", "--policy", "on", "--yes", "--provider",
                    "scripted", "--script", script(tmp_path, steps), "--workspace", str(ws))
    assert res.returncode == 6, res.stderr
    assert "✗ nothing was changed" in res.stdout
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


@pytest.mark.parametrize(("tried", "said"), [
    (["write"], "write was refused"),
    (["write", "bash"], "bash, write were refused")])
def test_a_change_the_second_reading_does_not_confirm_writes_nothing_and_exits_6(
        cli_env, tmp_path: Path, tried: list[str], said: str) -> None:
    # The 0.5B read "What is 17 + 25?" as a change and, with --yes, wrote output.txt.
    ws = tmp_path / "ws"
    ws.mkdir()
    args = {"write": {"path": "output.txt", "content": "42\n"},
            "bash": {"command": "echo 42 > output.txt"}}
    steps = [_kind("change"), {"text": json.dumps({"needs": "reading"})},
             *({"tool_calls": [[name, args[name]]]} for name in tried),
             {"tool_calls": [["ls", {}]]}, {"text": "17 + 25 = 42"}]
    res = steerable(cli_env, "run", "What is 17 + 25?", "--policy", "on", "--yes",
                    "--provider", "scripted", "--script", script(tmp_path, steps),
                    "--workspace", str(ws))
    assert not (ws / "output.txt").exists()
    assert res.returncode == 6, res.stderr
    assert "two readings disagreed" in res.stderr and said in res.stderr
    assert f"✗ nothing was changed: {said}" in res.stdout
