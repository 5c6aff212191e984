"""``steerable chat`` on a saved session shows the conversation so far; ``/`` opens a menu of
the commands and skills, and ``/SKILL task`` sends the task with the skill's instructions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect

from steerable import Message, ToolCall
from steerable.cli._recap import recap
from steerable.cli._slash import expand_slash
from steerable.coding import find_skills

SKILL = """---
name: release
description: How to cut a release of this project
---
1. Bump the version in pyproject.toml.
"""


def spawn(env: dict[str, str], root: Path, script: Path, *extra: str) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--provider",
                                          "scripted", "--script", str(script), "--workspace",
                                          str(root), *extra],
                         env={**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"},
                         encoding="utf-8", timeout=60, dimensions=(40, 160), cwd=str(root))


def saved(env: dict[str, str]) -> list[dict[str, Any]]:
    [path] = (Path(env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl")
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_resumed_chat_shows_the_conversation_so_far(cli_env: dict[str, str],
                                                      tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\n")
    steps = [{"tool_calls": [["read", {"path": "notes.txt"}]]},
             {"tool_calls": [["read", {"path": "missing.txt"}]]},
             {"text": "The notes say **alpha**."}]
    (tmp_path / "s.json").write_text(json.dumps(steps))
    first = subprocess.run([sys.executable, "-m", "steerable", "run", "what do the notes say?",
                            "--provider", "scripted", "--script", str(tmp_path / "s.json"),
                            "--workspace", str(root)], env=cli_env, cwd=root,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    sid = first.stderr.strip().split()[-1]
    (tmp_path / "c.json").write_text(json.dumps([{"text": "Still alpha."}]))
    child = spawn(cli_env, root, tmp_path / "c.json", "--session", sid)
    try:
        child.expect(f"session {sid}")
        child.expect("> what do the notes say\\?")
        child.expect("✓ read notes.txt")
        child.expect("✗ read missing.txt")
        child.expect("The notes say .{0,12}alpha")  # the answer, as Markdown (bold)
        child.sendline("and now?")
        child.expect("Still alpha.")
        child.expect("completed")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_slash_opens_a_menu_of_commands_and_skills(cli_env: dict[str, str],
                                                   tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".claude/skills/release").mkdir(parents=True)
    (root / ".claude/skills/release/SKILL.md").write_text(SKILL)
    (root / ".claude/commands").mkdir()
    (root / ".claude/commands/hello.md").write_text("---\ndescription: Say hello\n---\nHi $1")
    (tmp_path / "s.json").write_text(json.dumps([{"text": "Released."}]))
    child = spawn(cli_env, root, tmp_path / "s.json")
    try:
        child.expect("/help for keys")
        child.send("/")
        child.expect("Say hello")  # the menu: custom commands with their descriptions,
        child.expect("skill: How to cut a release")  # skills,
        child.expect("/discard")  # and the built-in commands
        child.send("rel")
        child.expect("skill: How to cut")  # the menu, narrowed to the skill
        child.send("\t")  # Tab takes it
        child.expect("/release")
        child.sendline(" version 2")
        child.expect("Released.")
        child.expect("completed")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    first = next(r["message"]["content"] for r in saved(cli_env) if r["type"] == "message")
    assert first.startswith("version 2\n\nFollow the release skill:\n1. Bump the version")


def test_recap_cuts_long_sessions_and_marks_failed_calls(tmp_path: Path) -> None:
    from rich.console import Console

    messages: list[Message] = []
    for i in range(15):
        call = ToolCall(id=f"c{i}", name="bash", arguments={"command": f"echo {i}"})
        messages += [Message(role="user", content=f"question {i}"),
                     Message(role="assistant", content="", tool_calls=(call,)),
                     Message(role="tool", content="boom" if i == 14 else "ok",
                             tool_call_id=f"c{i}", is_error=i == 14),
                     Message(role="assistant", content=f"answer {i}\n" + "more\n" * 20)]
    console = Console(width=100, record=True)
    for block in recap(messages, lambda t: t.replace("question", "q")):
        console.print(block)
    text = console.export_text()
    assert text.startswith("… 20 earlier messages")
    assert "> q 5" in text and "question" not in text and "> q 4" not in text
    assert "✓ bash echo 13" in text and "✗ bash echo 14" in text
    assert "… 9 more lines" in text


def test_a_skill_name_expands_only_when_no_command_has_it(tmp_path: Path) -> None:
    (tmp_path / ".claude/skills/release").mkdir(parents=True)
    (tmp_path / ".claude/skills/release/SKILL.md").write_text(SKILL)
    skills = find_skills(tmp_path, [])
    assert expand_slash([], "/release", skills) == (
        "Use the release skill.\n\nFollow the release skill:\n1. Bump the version in "
        "pyproject.toml.")
    assert expand_slash([], "/other x", skills) is None
    assert expand_slash([], "release", skills) is None
