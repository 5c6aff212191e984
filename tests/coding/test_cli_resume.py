"""The CLI and durable turns: a run killed with SIGKILL mid-tool, shown as pending, refused as
a new prompt, then continued with ``run --resume``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.coding.test_cli import script, steerable

HANG_ONCE = "if [ -f started ]; then echo second run; else touch started; sleep 30; fi"


def test_a_killed_run_is_pending_and_resumes(cli_env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    steps = [{"tool_calls": [["write", {"path": "b.txt", "content": "one\n"}],
                             ["bash", {"command": HANG_ONCE}]]},
             {"text": "never reached"}]
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable", "run", "go", "--json", "--yes", "--provider",
         "scripted", "--script", script(tmp_path, steps), "--workspace", str(ws)],
        env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    sid = None
    starts = 0
    for line in proc.stdout:
        event = json.loads(line)
        sid = event["session_id"]
        if event["kind"] == "tool_exec_start":
            starts += 1
            if event["tool_name"] == "bash":
                break
    deadline = time.monotonic() + 30
    while not (ws / "started").exists():  # the command is under way
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert starts == 2 and sid is not None
    (ws / "b.txt").unlink()  # so that a second run of `write` would show

    shown = steerable(cli_env, "sessions", "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert "pending turn" in shown.stdout and "bash" in shown.stdout and "--resume" in shown.stdout

    refused = steerable(cli_env, "run", "something else", "--session", sid, "--provider",
                        "scripted", "--script", script(tmp_path, []), "--workspace", str(ws))
    assert refused.returncode == 2 and "--resume" in refused.stderr

    resumed = steerable(cli_env, "run", "--session", sid, "--resume", "--json", "--yes",
                        "--provider", "scripted", "--script", script(tmp_path, [{"text": "done"}]),
                        "--workspace", str(ws))
    assert resumed.returncode == 0, resumed.stderr
    events = [json.loads(x) for x in resumed.stdout.splitlines()]
    assert events[0]["kind"] == "turn_start" and events[0]["resumed_from"]
    assert [e["tool_name"] for e in events if e["kind"] == "tool_exec_start"] == ["bash"]
    assert not (ws / "b.txt").exists()  # write ran once, before the kill
    end = next(e for e in events if e["kind"] == "tool_exec_end")
    assert "second run" in end["content"]
    js = json.loads(steerable(cli_env, "sessions", "export", sid, "--format", "json").stdout)
    assert [m["role"] for m in js["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]
    again = steerable(cli_env, "run", "--session", sid, "--resume", "--provider", "scripted",
                      "--script", script(tmp_path, []), "--workspace", str(ws))
    assert again.returncode == 2 and "no pending turn" in again.stderr


def test_resume_needs_a_session_and_no_prompt(cli_env: dict[str, str], tmp_path: Path) -> None:
    res = steerable(cli_env, "run", "--resume", "--provider", "scripted")
    assert res.returncode == 2 and "--session" in res.stderr
    res = steerable(cli_env, "run", "text", "--resume", "--session", "s1", "--provider", "scripted")
    assert res.returncode == 2 and "no prompt" in res.stderr


def _killed_mid_tool(cli_env: dict[str, str], tmp_path: Path) -> tuple[Path, str]:
    """A `run` killed with SIGKILL while its bash call runs: its workspace and session id."""
    ws = tmp_path / "project"
    ws.mkdir()
    steps = [{"tool_calls": [["bash", {"command": HANG_ONCE}]]}, {"text": "never reached"}]
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable", "run", "go", "--json", "--yes", "--provider",
         "scripted", "--script", script(tmp_path, steps), "--workspace", str(ws)],
        env=cli_env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    sid = json.loads(proc.stdout.readline())["session_id"]
    deadline = time.monotonic() + 30
    while not (ws / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return ws, sid


def test_chat_announces_and_resumes_a_pending_turn(cli_env: dict[str, str], tmp_path: Path) -> None:
    import pexpect

    ws, sid = _killed_mid_tool(cli_env, tmp_path)

    resumed_script = script(tmp_path, [{"text": "Resumed and finished."},
                                       {"text": "Now the new message."}])
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--session", sid,
                                           "--provider", "scripted", "--script", resumed_script,
                                           "--workspace", str(ws)],
                          env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    try:
        child.expect("has a pending turn")
        child.sendline("something new")
        child.expect("/resume continues it")  # held, and nothing was started
        child.expect("your message stays queued")
        child.sendline("/resume")
        child.expect("continuing the pending turn")
        child.expect("Resumed and finished.")
        child.expect("completed")
        child.expect("Now the new message.")  # the held message runs after the resumed turn
        child.expect("completed")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    js = json.loads(steerable(cli_env, "sessions", "export", sid, "--format", "json").stdout)
    contents = [m["content"] for m in js["messages"]]
    assert contents[0] == "go" and contents[-3:] == [
        "Resumed and finished.", "something new", "Now the new message."]


def test_chat_runs_a_held_message_once_the_pending_turn_is_discarded(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    import pexpect

    ws, sid = _killed_mid_tool(cli_env, tmp_path)

    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--session", sid,
                                           "--provider", "scripted", "--script",
                                           script(tmp_path, [{"text": "Answer to the held one."}]),
                                           "--workspace", str(ws)],
                          env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    try:
        child.expect("has a pending turn")
        child.sendline("held message")
        child.expect("your message stays queued")
        child.sendline("/discard")
        child.expect("pending turn dropped")
        child.expect("Answer to the held one.")  # sent as soon as nothing blocks it
        child.expect("completed")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    js = json.loads(steerable(cli_env, "sessions", "export", sid, "--format", "json").stdout)
    contents = [m["content"] for m in js["messages"]]
    assert contents == ["held message", "Answer to the held one."]  # the killed turn was dropped
