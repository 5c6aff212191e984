"""Skills (SKILL.md) and custom slash commands: found, offered, used through run and chat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
from hypothesis import given
from hypothesis import strategies as st

from steerable.coding import SlashCommand, expand_command, find_commands, find_skills

SKILL = """---
name: release
description: How to cut a release of this project
---
1. Bump the version in pyproject.toml.
2. Run `make dist`.
"""


def write(root: Path, rel: str, text: str) -> Path:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    return root / rel


def steerable(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def events(res: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def test_skills_are_found_per_place_and_the_project_wins(tmp_path: Path) -> None:
    user = tmp_path / "user-skills"
    write(user, "release/SKILL.md", "---\nname: release\ndescription: the user's\n---\nold")
    write(user, "notes/SKILL.md", "---\ndescription: Taking notes\n---\nWrite them down.")
    root = tmp_path / "ws"
    write(root, ".claude/skills/release/SKILL.md", SKILL)
    write(root, ".steerable/skills/bad/SKILL.md", "---\nname: Not A Name!\n---\nx")
    write(root, ".claude/skills/empty/README.md", "no SKILL.md here")
    os.symlink(tmp_path / "user-skills" / "notes" / "SKILL.md", root / "linked.md")
    (root / ".claude/skills/linked").mkdir()
    os.symlink(root / "linked.md", root / ".claude/skills/linked/SKILL.md")
    skills = find_skills(root, [user])
    assert [(s.name, s.description) for s in skills] == [
        ("notes", "Taking notes"), ("release", "How to cut a release of this project")]
    assert skills[1].body().startswith("1. Bump the version")


def test_a_skill_is_listed_in_the_prompt_and_its_body_read_when_used(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, ".claude/skills/release/SKILL.md", SKILL)
    steps = [{"tool_calls": [["skill", {"name": "release"}]]}, {"text": "Bumped."}]
    (tmp_path / "s.json").write_text(json.dumps(steps))
    res = steerable(cli_env, "run", "cut a release", "--json", "--provider", "scripted",
                    "--script", str(tmp_path / "s.json"), "--workspace", str(root), cwd=root)
    assert res.returncode == 0, res.stderr
    end = next(e for e in events(res) if e["kind"] == "tool_exec_end")
    assert end["tool_name"] == "skill" and "Run `make dist`." in end["content"]
    assert "description: How to cut" not in end["content"]  # the body, not the front matter


def test_a_slash_command_file_becomes_the_prompt_of_a_run(cli_env: dict[str, str],
                                                         tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, ".claude/commands/fix.md", "---\ndescription: Fix an issue\n---\n"
                                           "Fix issue #$1. Details: $ARGUMENTS")
    (tmp_path / "s.json").write_text(json.dumps([{"text": "ok"}]))
    res = steerable(cli_env, "run", "/fix 42 crash on start", "--provider", "scripted",
                    "--script", str(tmp_path / "s.json"), "--workspace", str(root), cwd=root)
    assert res.returncode == 0, res.stderr
    sid = res.stderr.strip().split()[-1]
    exported = json.loads(steerable(cli_env, "sessions", "export", sid, "--format", "json",
                                    cwd=root).stdout)
    assert exported["messages"][0]["content"] == "Fix issue #42. Details: 42 crash on start"
    assert [c.name for c in find_commands(root)] == ["fix"]


@given(st.text(max_size=40), st.lists(st.text(alphabet="ab $1ARGUMENTS", max_size=8),
                                      max_size=4))
def test_expansion_puts_every_argument_somewhere_and_nothing_else(body: str,
                                                                 words: list[str]) -> None:
    arguments = " ".join(w for w in words if w.strip())
    text = expand_command(SlashCommand("c", "", body, Path("c.md")), arguments)
    if arguments and "$ARGUMENTS" not in body and "$" not in body:
        assert text == body + "\n\n" + arguments
    if "$" not in body:
        assert text.startswith(body)


def test_chat_asks_about_project_hooks_once_and_help_lists_commands_and_skills(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    root = tmp_path / "ws"
    marker = tmp_path / "stop-ran"
    write(root, ".claude/settings.json", json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": f"touch {marker}"}]}]}}))
    write(root, ".claude/skills/release/SKILL.md", SKILL)
    write(root, ".claude/commands/hello.md", "---\ndescription: Say hello\n---\nSay hello to $1")
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "Hello, Ada!"}]))
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    args = ["-m", "steerable", "chat", "--provider", "scripted", "--script", str(script),
            "--workspace", str(root)]
    child = pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=60,
                          dimensions=(40, 160), cwd=str(root))
    try:
        child.expect("1 command hook")
        child.expect("Stop: touch")
        child.expect(r"Run them in this project\? \[y/N\]")
        child.sendline("y")
        child.expect("/help for keys")
        child.sendline("/help")
        child.expect("/hello")
        child.expect("Say hello")
        child.expect("release")
        child.expect("How to cut a release")
        child.sendline("/hello Ada")
        child.expect("Hello, Ada!")
        child.expect("completed")
        # /quit, not Ctrl+D: a line typed while the chat is still printing waits in the
        # terminal for the prompt; a Ctrl+D typed then is lost (a load-flaky 60 s hang).
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert marker.exists()
    child = pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=60,
                          dimensions=(40, 160), cwd=str(root))
    try:
        index = child.expect([r"Run them in this project", "/help for keys"])
        assert index == 1  # the consent was remembered
        # A line first: a Ctrl+D typed before the prompt reads the terminal raw would be lost.
        child.sendline("/help")
        child.expect("How to cut a release")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
