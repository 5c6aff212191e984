"""The snapshot hook on a real loop with the real coding tools: write, edit and bash are all
covered (no tool knows about undo), read-only tools and dry runs take no snapshot, and a hard
abort can put the aborted turn's files back."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, TurnStatus
from steerable._hooks import Hook, HookResult, ToolCallContext, ToolResultContext
from steerable._messages import ToolCall, ToolResult
from steerable.coding import (
    SNAPSHOT_HOOK_PRIORITY,
    SNAPSHOT_HOOK_TIMEOUT,
    NothingToUndoError,
    Sandbox,
    SnapshotHook,
    Snapshots,
    UndoConflictError,
    coding_tools,
)
from tests.coding.undo_helpers import fingerprint


def _loop(ws: Path, replies: list[Reply], hook: SnapshotHook, *,
          dry_run: bool = False) -> AgentLoop:
    agent = Agent(provider=ScriptedProvider(replies), dry_run=dry_run,
                  tools=coding_tools(ws, sandbox=Sandbox(enabled=False)))
    loop = AgentLoop(agent)
    loop.register_hook(hook, priority=SNAPSHOT_HOOK_PRIORITY, timeout=SNAPSHOT_HOOK_TIMEOUT)
    return loop


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hello')\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(ws / "run.sh", 0o755)
    return ws


async def test_a_turn_of_write_edit_and_bash_is_undone_byte_for_byte(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    snaps = Snapshots(ws, tmp_path / "data")
    start = fingerprint(ws)
    replies = [
        Reply(tool_calls=[("read", {"path": "src/app.py"})]),
        Reply(tool_calls=[("write", {"path": "notes/todo.md", "content": "- ship\n"})]),
        Reply(tool_calls=[("edit", {"path": "src/app.py", "old_text": "hello",
                                     "new_text": "bye"})]),
        Reply(tool_calls=[("bash", {"command": "sed -i s/run/walk/ run.sh && chmod 600 run.sh"
                                                " && mv src/app.py src/main.py && rm -f x"
                                                " && mkdir -p out && ln -s ../run.sh out/r"})]),
        Reply(text="done"),
    ]
    async with _loop(ws, replies, SnapshotHook(snaps)) as loop:
        result = await loop.run_turn("change things", session_id="s1")
    assert result.status is TurnStatus.COMPLETED
    after = fingerprint(ws)
    assert after != start
    [step] = snaps.steps("s1")
    assert step.turn_id == result.turn_id
    assert set(step.files) >= {"notes/todo.md", "src/app.py", "src/main.py", "run.sh", "out/r"}
    snaps.undo("s1")
    assert fingerprint(ws) == start
    snaps.redo("s1")
    assert fingerprint(ws) == after


async def test_read_only_tools_and_dry_runs_take_no_snapshot(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    snaps = Snapshots(ws, tmp_path / "data")
    taken: list[str] = []
    original = snaps.snapshot

    def spy(session_id: str, turn_id: str, call_id: str, tool: str, phase: str = "before") -> str:
        taken.append(f"{tool}:{phase}")
        return original(session_id, turn_id, call_id, tool, phase)

    snaps.snapshot = spy  # type: ignore[method-assign]
    replies = [Reply(tool_calls=[("ls", {"path": "."})]),
               Reply(tool_calls=[("grep", {"pattern": "hello"})]), Reply(text="ok")]
    async with _loop(ws, replies, SnapshotHook(snaps)) as loop:
        await loop.run_turn("look", session_id="s1")
    replies = [Reply(tool_calls=[("write", {"path": "a", "content": "x"})]), Reply(text="ok")]
    async with _loop(ws, replies, SnapshotHook(snaps), dry_run=True) as loop:
        await loop.run_turn("pretend", session_id="s1")
    assert taken == []
    replies = [Reply(tool_calls=[("write", {"path": "a", "content": "x"})]), Reply(text="ok")]
    async with _loop(ws, replies, SnapshotHook(snaps)) as loop:
        await loop.run_turn("write", session_id="s1")
    assert taken == ["write:before", "write:after"]


async def _hard_abort_during_bash(ws: Path, hook: SnapshotHook, *, ask: bool) -> str:
    replies = [
        Reply(tool_calls=[("write", {"path": "made.txt", "content": "by the agent\n"})]),
        Reply(tool_calls=[("bash", {"command": "echo changed > src/app.py; echo started; "
                                                "sleep 30"})]),
        Reply(text="never"),
    ]
    async with _loop(ws, replies, hook) as loop:
        events = loop.subscribe(kinds=[EventKind.TOOL_EXEC_START, EventKind.TOOL_EXEC_PROGRESS])
        handle = loop.start_turn("work", session_id="s1")
        # The abort comes once bash has changed the file and said so, however slow the machine
        # (a poll bounded at 4 s let it come while bash was still starting, under load).
        async for event in events:
            if event.kind is EventKind.TOOL_EXEC_PROGRESS and "started" in event.text:
                break
        if ask:
            hook.restore_when_aborted("s1")
        assert loop.interrupt_hard("s1")
        result = await handle
        assert result.status is TurnStatus.ABORTED
        # The observer restores after TURN_END, off the loop; this waits for it (or does it:
        # whichever comes first does it, once).
        await asyncio.to_thread(hook.restore_aborted, "s1", result.turn_id)
    return result.turn_id


async def test_a_hard_abort_can_put_the_turns_files_back(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    start = fingerprint(ws)
    hook = SnapshotHook(Snapshots(ws, tmp_path / "data"))
    turn_id = await _hard_abort_during_bash(ws, hook, ask=True)
    assert turn_id in hook.restored
    assert fingerprint(ws) == start


async def test_a_hard_abort_keeps_files_unless_asked(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    snaps = Snapshots(ws, tmp_path / "data")
    hook = SnapshotHook(snaps)
    turn_id = await _hard_abort_during_bash(ws, hook, ask=False)
    assert turn_id not in hook.restored
    assert (ws / "made.txt").exists() and (ws / "src" / "app.py").read_text() == "changed\n"
    snaps.undo("s1")  # the aborted call never reported back: undo compares with the tree now
    assert not (ws / "made.txt").exists() and (ws / "src" / "app.py").read_text() == \
        "print('hello')\n"


async def test_restore_on_abort_applies_to_every_aborted_turn(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    start = fingerprint(ws)
    hook = SnapshotHook(Snapshots(ws, tmp_path / "data"), restore_on_abort=True)
    turn_id = await _hard_abort_during_bash(ws, hook, ask=False)
    assert turn_id in hook.restored
    assert fingerprint(ws) == start


def _contexts(call: ToolCall, *, read_only: bool = False) -> tuple[ToolCallContext,
                                                                   ToolResultContext]:
    ids = {"turn_id": "t1", "session_id": "s1", "parent_turn_id": None, "iteration": 1}
    return (ToolCallContext(**ids, call=call, read_only=read_only),
            ToolResultContext(**ids, call=call, result=ToolResult("ok"), read_only=read_only))


def test_a_calls_after_snapshot_is_taken_by_whichever_process_runs_its_after_tool(
        tmp_path: Path) -> None:
    # Two workers on one workspace and store (Temporal: a call's two hooks are two
    # activities, each on any worker): the "after" must be the state right after the call,
    # not whatever the workspace holds when undo looks.
    ws = _workspace(tmp_path)
    here, there = (SnapshotHook(Snapshots(ws, tmp_path / "data")) for _ in range(2))
    before, after = _contexts(ToolCall("c1", "write", {"path": "src/app.py"}))
    here.before_tool(before)
    (ws / "src" / "app.py").write_text("print('call')\n")
    there.after_tool(after)
    (ws / "src" / "app.py").write_text("print('the user, after the turn')\n")
    try:
        there.snapshots.undo("s1")
    except UndoConflictError as exc:
        assert exc.paths == ("src/app.py",)
    else:
        raise AssertionError("undo took back a change the turn did not make")
    assert (ws / "src" / "app.py").read_text() == "print('the user, after the turn')\n"


def test_an_after_tool_with_no_before_anywhere_takes_no_snapshot(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    hook = SnapshotHook(Snapshots(ws, tmp_path / "data"))
    _, mutating = _contexts(ToolCall("c1", "bash", {"command": "true"}))
    _, reading = _contexts(ToolCall("c2", "read", {"path": "run.sh"}), read_only=True)
    hook.after_tool(mutating)
    hook.after_tool(reading)
    assert not (hook.snapshots.root / "sessions" / "s1.jsonl").exists()
    try:
        hook.snapshots.undo("s1")
    except NothingToUndoError:
        pass
    else:
        raise AssertionError("a step with no before snapshot")


class _Seen(Hook):
    name = "seen"

    def __init__(self) -> None:
        self.after: list[tuple[str, bool, bool]] = []

    def after_tool(self, ctx: ToolResultContext) -> HookResult:
        self.after.append((ctx.call.name, ctx.read_only, ctx.dry_run))
        return None


async def test_after_tool_hears_whether_the_call_could_change_anything(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    for dry_run in (False, True):
        seen = _Seen()
        replies = [Reply(tool_calls=[("read", {"path": "run.sh"})]),
                   Reply(tool_calls=[("write", {"path": "a", "content": "x"})]),
                   Reply(text="ok")]
        agent = Agent(provider=ScriptedProvider(replies), dry_run=dry_run,
                      tools=coding_tools(ws, sandbox=Sandbox(enabled=False)))
        async with AgentLoop(agent) as loop:
            loop.register_hook(seen)
            await loop.run_turn("go", session_id="s1")
        assert seen.after == [("read", True, dry_run), ("write", False, dry_run)]
