"""The CLI with content parts and streamed tool arguments: ``run --attach``, the chat's
``/attach``, and a long ``write`` shown growing while the model writes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def steerable(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def setup(tmp_path: Path, steps: list[dict[str, Any]]) -> tuple[Path, str]:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    (ws / "cat.png").write_bytes(PNG)
    (ws / "notes.txt").write_text("remember the milk\n")
    (tmp_path / "s.json").write_text(json.dumps(steps))
    return ws, str(tmp_path / "s.json")


def saved(env: dict[str, str]) -> tuple[list[dict[str, Any]], Path]:
    sessions = list((Path(env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1
    lines = [json.loads(x) for x in sessions[0].read_text().splitlines()]
    return [r["message"] for r in lines if r["type"] == "message"], sessions[0]


def test_run_attach_sends_the_files_with_the_prompt(cli_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    ws, script = setup(tmp_path, [{"text": "A cat and a note."}])
    res = steerable(cli_env, "run", "what are these?", "--attach", "cat.png", "--attach",
                    "notes.txt", "--json", "--provider", "scripted", "--script", script,
                    "--workspace", str(ws), cwd=ws)
    assert res.returncode == 0, res.stderr
    start = next(json.loads(x) for x in res.stdout.splitlines() if '"turn_start"' in x)
    assert start["input"] == ("what are these?\n[image: image/png, 2.1 KB]\n"
                              "[file: notes.txt, text/plain, 18 B]")
    messages, path = saved(cli_env)
    parts = messages[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image", "file"]
    # The bytes are beside the history, by hash; the history line holds the key.
    blobs = path.with_suffix(".blobs")
    assert (blobs / parts[1]["blob"]).read_bytes() == PNG
    assert (blobs / parts[2]["blob"]).read_bytes() == b"remember the milk\n"


def test_run_attach_refuses_what_it_cannot_take(cli_env: dict[str, str], tmp_path: Path) -> None:
    ws, script = setup(tmp_path, [{"text": "never"}])
    with (ws / "huge.bin").open("wb") as fh:
        fh.truncate(20_000_001)
    for name, said in (("missing.png", "cannot attach missing.png: No such file"),
                       ("huge.bin", "cannot attach huge.bin: 20.0 MB is over the 20.0 MB limit")):
        res = steerable(cli_env, "run", "look", "--attach", name, "--provider", "scripted",
                        "--script", script, "--workspace", str(ws), cwd=ws)
        assert res.returncode == 2 and said in res.stderr, res.stderr
    assert not (Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions").exists()  # nothing started


LONG = "".join(f"line {i}\n" for i in range(400))


def test_run_shows_a_long_write_growing_while_the_model_writes_it(cli_env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    steps = [{"tool_calls": [["write", {"path": "notes.md", "content": LONG}]],
              "argument_pieces": 40, "piece_delay": 0.05},
             {"text": "Written."}]
    ws, script = setup(tmp_path, steps)
    env = {k: v for k, v in cli_env.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm-256color"
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "run", "write the notes", "--yes",
                                           "--provider", "scripted", "--script", script,
                                           "--workspace", str(ws)], env=env, encoding="utf-8",
                          timeout=60, dimensions=(40, 160), cwd=str(ws))
    try:
        child.expect(r"writing write notes\.md: \d+ B, (\d+) lines")
        first = int(child.match.group(1))
        child.expect(r"writing write notes\.md: \d\.\d kB, (\d+) lines")
        grown = int(child.match.group(1))
        child.expect(r"✓ write \S*notes\.md")  # the call's own line replaces the live one
        child.expect("Written.")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert grown > first > 0
    assert (ws / "notes.md").read_text() == LONG


def test_chat_attach_sends_the_file_with_the_next_message(cli_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    ws, script = setup(tmp_path, [{"text": "It is a cat."}])
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--provider",
                                           "scripted", "--script", script, "--workspace",
                                           str(ws)], env=env, encoding="utf-8", timeout=30,
                          dimensions=(40, 160), cwd=str(ws))
    try:
        child.expect("/help for keys")
        child.sendline("/attach nowhere.png")
        child.expect("cannot attach nowhere.png")
        child.sendline("/attach cat.png")
        child.expect(r"attached \[image: image/png, 2.1 KB\]")
        child.sendline("what is this?")
        child.expect("It is a cat.")
        child.expect("completed · 1 iteration")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    messages, _ = saved(cli_env)
    assert [p["type"] for p in messages[0]["content"]] == ["text", "image"]
    assert messages[0]["content"][0]["text"] == "what is this?"
