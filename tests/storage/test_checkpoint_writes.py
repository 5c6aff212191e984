"""A checkpoint write is whole or undone: a disk that fills up at any byte of an append or a
rewrite leaves the previous checkpoint, and the turn reports an ERROR (as for the session
file), so a resumer never re-runs a tool that had finished."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from steerable import Agent, AgentLoop, EventKind, Message, ScriptedProvider, tool
from steerable.providers import Reply
from steerable.storage import JSONLSessionStore
from steerable.storage import _checkpoint_files as files_module
from tests.storage.checkpoint_contract import sample_checkpoint


def failing_after(limit: int) -> Any:
    """An os.write that lets ``limit`` bytes through in total, short writes included, then
    fails like a full disk."""
    left = [limit]

    def write(fd: int, data: Any) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = min(len(data), left[0], 7)  # short writes on the way, as a nearly full disk gives
        left[0] -= n
        return os.write(fd, bytes(data[:n]))

    return write


@pytest.mark.parametrize("path", ["append", "rewrite"])
def test_a_write_failing_at_any_byte_leaves_the_previous_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    store = JSONLSessionStore(tmp_path)
    first = sample_checkpoint()
    store.save_checkpoint(first)
    before = store.checkpoint_path("s1").read_bytes()
    if path == "append":  # the same turn adds a message: only that and a state are appended
        nxt = sample_checkpoint(seq=4, messages=(*first.messages, Message("user", "x" * 300)))
    else:  # compression dropped messages: the file is written anew
        nxt = sample_checkpoint(seq=4, messages=(*first.messages[1:], Message("user", "y")))
    size = 0

    def measure(fd: int, data: Any) -> int:
        nonlocal size
        size = len(data)
        return os.write(fd, data)

    probe = JSONLSessionStore(tmp_path / "probe")
    probe.save_checkpoint(first)
    monkeypatch.setattr(files_module, "_os_write", measure)
    probe.save_checkpoint(nxt)
    assert size > 100
    for k in range(0, size, 3):
        monkeypatch.setattr(files_module, "_os_write", failing_after(k))
        with pytest.raises(OSError, match="No space left"):
            store.save_checkpoint(nxt)
        assert store.checkpoint_path("s1").read_bytes() == before, f"failed at byte {k}"
        assert JSONLSessionStore(tmp_path).load_checkpoint("s1") == first
        assert not list(tmp_path.glob(".*.tmp"))  # no half-written file left behind
    monkeypatch.setattr(files_module, "_os_write", os.write)
    store.save_checkpoint(nxt)
    assert JSONLSessionStore(tmp_path).load_checkpoint("s1") == nxt


async def test_a_full_disk_under_a_turn_is_an_error_event_and_the_turn_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @tool
    async def act(name: str) -> str:
        """Act."""
        return "ok"

    provider = ScriptedProvider([Reply(tool_calls=[("act", {"name": "a"})]), Reply(text="done")])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[act]),
                     store=JSONLSessionStore(tmp_path))
    monkeypatch.setattr(files_module, "_os_write", failing_after(40))
    sub = loop.subscribe(buffer=1000)
    result = await loop.run_turn("go", session_id="s")
    await loop.aclose()
    errors = [e for e in sub.drain_nowait() if e.kind is EventKind.ERROR]
    assert result.status == "completed"
    assert errors and all(e.source == "checkpoint" for e in errors)
    assert "No space left on device" in errors[0].message
    assert [m.content for m in loop.session_messages("s")][-1] == "done"
