"""Permission rules see normalised subjects: no bypass by path spelling or compound commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable import Agent, AgentLoop, EventKind, Permissions, Reply, ScriptedProvider
from steerable.coding import Workspace, coding_tools
from steerable.coding._shell import command_subjects

K = EventKind


@pytest.mark.parametrize(("line", "expected"), [
    ("git status", ["git status"]),
    ("git log; rm -rf .", ["git log", "rm -rf ."]),
    ('git log && echo "a; b" | wc -l', ["git log", 'echo "a; b"', "echo a; b", "wc -l"]),
    ("echo $(rm -rf /) done", ["echo $(rm -rf /) done", "rm -rf /"]),
    ("echo `whoami`", ["echo `whoami`", "whoami"]),
    ("(cd x && make) || true", ["(cd x && make)", "true", "cd x", "make"]),
    ("echo 'a && b'", ["echo 'a && b'", "echo a && b"]),
    ("sleep 1 &\nls", ["sleep 1", "ls"]),
])
def test_command_subjects(line: str, expected: list[str]) -> None:
    assert command_subjects(line) == expected


async def run_calls(tmp_path: Path, calls, rules):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "k").write_text("key")
    (tmp_path / "src").mkdir()
    asked: list[str] = []

    class Approver:
        def approve_tool(self, ctx) -> bool:
            asked.append(str(dict(ctx.call.arguments)))
            return False  # never run what was asked: we only want to see who was asked

    provider = ScriptedProvider([Reply(tool_calls=calls), Reply(text="ok")])
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(Workspace(tmp_path))),
                     permissions=Permissions(rules))
    loop.register_hook(Approver())
    sub = loop.subscribe()
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    skipped = {e.call_id: e.detail for e in events if e.kind is K.TOOL_EXEC_SKIPPED}
    ran = [e.call_id for e in events if e.kind is K.TOOL_EXEC_START]
    await loop.aclose()
    return skipped, ran, asked


async def test_path_spellings_cannot_dodge_a_deny_rule(tmp_path: Path) -> None:
    spellings = ["secrets/k", "./secrets/k", "src/../secrets/k", str(tmp_path / "secrets" / "k")]
    calls = [("write", {"path": p, "content": "x"}) for p in spellings]
    skipped, ran, asked = await run_calls(tmp_path, calls, [("allow", "write"), ("deny", "write(secrets/*)")])
    assert len(skipped) == 4 and all("deny: write(secrets/*)" in d for d in skipped.values())
    assert ran == [] and asked == []
    assert (tmp_path / "secrets" / "k").read_text() == "key"


async def test_allow_covers_each_command_not_the_line(tmp_path: Path) -> None:
    calls = [("bash", {"command": "git --version"}),
             ("bash", {"command": "git --version; touch pwned"}),
             ("bash", {"command": "git log $(touch pwned2)"})]
    skipped, ran, asked = await run_calls(tmp_path, calls, [("allow", "bash(git *)")])
    assert len(ran) == 1  # only the plain git command ran without asking
    assert len(asked) == 2 and all("pwned" in a for a in asked)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


async def test_deny_on_any_command_of_the_line(tmp_path: Path) -> None:
    calls = [("bash", {"command": "echo hi && rm -rf src"})]
    skipped, ran, _ = await run_calls(tmp_path, calls, [("allow", "bash"), ("deny", "bash(rm *)")])
    assert ran == [] and "deny: bash(rm *)" in next(iter(skipped.values()))
    assert (tmp_path / "src").exists()


async def test_read_rules_hold_for_grep_find_and_ls(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("key here too\n")
    calls = [("grep", {"pattern": "key"}), ("find", {"pattern": "*"}), ("ls", {"path": "secrets"}),
             ("ls", {}), ("grep", {"pattern": "key", "path": "secrets/k"})]
    provider = ScriptedProvider([Reply(tool_calls=calls), Reply(text="ok")])
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "k").write_text("key")
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(Workspace(tmp_path))),
                     permissions=Permissions([("deny", "read(secrets/**)")]))
    sub = loop.subscribe()
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    order = [c.id for e in events if e.kind is K.LLM_RESPONSE for c in e.tool_calls]
    ends = {e.call_id: e.content for e in events if e.kind is K.TOOL_EXEC_END}
    skipped = [e for e in events if e.kind is K.TOOL_EXEC_SKIPPED]
    await loop.aclose()
    grep_all, find_all, ls_secrets, ls_root = (ends[i] for i in order if i in ends)
    assert "notes.txt:1" in grep_all and "secrets" not in grep_all
    assert "notes.txt" in find_all and "secrets" not in find_all
    assert "empty" in ls_secrets and "k" not in ls_secrets.split()
    assert "secrets/" in ls_root  # the folder itself is not named by secrets/**
    assert [(s.tool_name, s.reason) for s in skipped] == [("grep", "denied")]
    assert "deny: read(secrets/**)" in skipped[0].detail


async def test_write_rules_hold_for_edit(tmp_path: Path) -> None:
    calls = [("edit", {"path": "secrets/k", "old_text": "key", "new_text": "x"})]
    skipped, ran, asked = await run_calls(tmp_path, calls, [("allow", "edit"), ("deny", "write(secrets/*)")])
    assert ran == [] and "deny: write(secrets/*)" in next(iter(skipped.values()))
    assert (tmp_path / "secrets" / "k").read_text() == "key"


async def test_a_line_the_reader_does_not_understand_is_asked(tmp_path: Path) -> None:
    calls = [("bash", {"command": "git --version # it's fine\ntouch pwned"})]
    skipped, ran, asked = await run_calls(tmp_path, calls, [("allow", "bash(git *)")])
    assert ran == [] and len(asked) == 1
    assert not (tmp_path / "pwned").exists()
