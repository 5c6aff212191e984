"""``steerable undo``, ``redo``, ``rewind`` and ``sessions rm`` end to end, as subprocesses, on
turns run by ``steerable run`` with the scripted provider; and ``/undo`` in chat."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.coding.test_cli import script, steerable
from tests.coding.undo_helpers import fingerprint


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    return root


def _run(env: dict[str, str], tmp_path: Path, ws: Path, command: str,
         session: str | None = None) -> str:
    steps = [{"tool_calls": [["bash", {"command": command}]]}, {"text": "done"}]
    args = ["run", "change", "--json", "--yes", "--no-sandbox", "--provider", "scripted",
            "--script", script(tmp_path, steps), "--workspace", str(ws)]
    if session:
        args += ["--session", session]
    res = steerable(env, *args)
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout.splitlines()[0])["session_id"])


def test_undo_redo_and_a_refused_conflict(cli_env, tmp_path: Path, ws: Path) -> None:
    start = fingerprint(ws)
    sid = _run(cli_env, tmp_path, ws, "sed -i s/hello/bye/ a.txt && mkdir d && echo x > d/new "
                                      "&& chmod 700 a.txt")
    changed = fingerprint(ws)
    listed = steerable(cli_env, "undo", "--list", "--json", "--workspace", str(ws))
    [turn] = json.loads(listed.stdout)["turns"]
    assert turn["number"] == 1 and turn["prompt"] == "change"
    assert turn["files"] == ["a.txt", "d", "d/new"] and not turn["undone"]
    res = steerable(cli_env, "undo", "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    assert "3 path(s)" in res.stdout and f"--session {sid}" in res.stdout
    assert fingerprint(ws) == start
    res = steerable(cli_env, "redo", "--workspace", str(ws))
    assert res.returncode == 0 and fingerprint(ws) == changed
    (ws / "a.txt").write_text("my own edit\n")
    res = steerable(cli_env, "undo", "--workspace", str(ws))
    assert res.returncode == 1
    assert "cannot undo" in res.stderr and "a.txt" in res.stderr and "--force" in res.stderr
    assert (ws / "a.txt").read_text() == "my own edit\n"
    res = steerable(cli_env, "undo", "--force", "--workspace", str(ws))
    assert res.returncode == 0 and fingerprint(ws) == start
    res = steerable(cli_env, "undo", "--workspace", str(ws))
    assert res.returncode == 1 and "no change left to undo" in res.stderr


def test_rewind_code_and_conversation_to_a_turn(cli_env, tmp_path: Path, ws: Path) -> None:
    sid = _run(cli_env, tmp_path, ws, "echo one >> a.txt")
    after_first = fingerprint(ws)
    _run(cli_env, tmp_path, ws, "echo two >> a.txt && touch b.txt", session=sid)
    _run(cli_env, tmp_path, ws, "rm a.txt", session=sid)
    res = steerable(cli_env, "rewind", "2", "--both", "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    assert fingerprint(ws) == after_first
    shown = json.loads(steerable(cli_env, "sessions", "export", sid, "--format", "json").stdout)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant", "tool", "assistant"]
    res = steerable(cli_env, "rewind", "9", "--code", "--workspace", str(ws))
    assert res.returncode == 2 and "no turn '9'" in res.stderr
    res = steerable(cli_env, "rewind", "1", "--workspace", str(ws))
    assert res.returncode == 2


def test_sessions_rm_removes_the_snapshots(cli_env, tmp_path: Path, ws: Path) -> None:
    sid = _run(cli_env, tmp_path, ws, "echo more >> a.txt")
    objects = list((tmp_path / "data" / "snapshots").rglob("objects/*/*"))
    assert objects
    res = steerable(cli_env, "sessions", "rm", sid)
    assert res.returncode == 0 and "undo snapshots" in res.stdout
    assert not list((tmp_path / "data" / "snapshots").rglob("sessions/*.jsonl"))
    assert not list((tmp_path / "data" / "snapshots").rglob("objects/[0-9a-f][0-9a-f]/*"))
    res = steerable(cli_env, "undo", "--workspace", str(ws))
    assert res.returncode == 2 and "no agent changes were recorded" in res.stderr


def test_undo_off_takes_no_snapshot(cli_env, tmp_path: Path, ws: Path) -> None:
    _run({**cli_env, "STEERABLE_UNDO": "0"}, tmp_path, ws, "echo more >> a.txt")
    assert not (tmp_path / "data" / "snapshots").exists()


def test_chat_undo_and_redo(cli_env, tmp_path: Path, ws: Path) -> None:
    start = fingerprint(ws)
    steps = [{"tool_calls": [["write", {"path": "a.txt", "content": "rewritten\n"}]]},
             {"text": "wrote it"}]
    path = Path(script(tmp_path, steps))
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--provider",
                                           "scripted", "--script", str(path), "--workspace",
                                           str(ws)],
                          env=env, encoding="utf-8", timeout=30, dimensions=(40, 160))
    try:
        child.expect("/help for keys")
        child.sendline("rewrite a.txt")
        child.expect("completed")
        child.sendline("/undo 0")
        child.expect(r"usage: /undo \[N\]")
        child.sendline("/undo")
        child.expect(r"undid 1 turn")
        assert fingerprint(ws) == start
        child.sendline("/redo")
        child.expect(r"redid 1 turn")
        assert (ws / "a.txt").read_text() == "rewritten\n"
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_run_with_undo_on_abort_puts_the_files_back_before_it_exits(cli_env, tmp_path: Path,
                                                                    ws: Path) -> None:
    start = fingerprint(ws)
    endless = [{"tool_calls": [["bash", {"command": "echo agent > a.txt; mkdir -p d; "
                                                    "touch d/x; while :; do sleep 0.05; done"}]]}]
    env = {**cli_env, "STEERABLE_UNDO_ON_ABORT": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "steerable", "run", "go", "--yes",
                             "--no-sandbox", "--provider", "scripted", "--script",
                             script(tmp_path, endless), "--workspace", str(ws)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while not (ws / "d" / "x").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    for line in proc.stderr:  # the first press landed: it says so
        if "Ctrl+C again" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    assert "put back 3 path(s) the aborted turn changed" in err
    assert fingerprint(ws) == start
