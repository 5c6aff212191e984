"""The JSONL session store: round trips, crash safety, corruption, old files, and the loop."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from steerable import Agent, AgentLoop, Message, Reply, ScriptedProvider, ToolCall, TurnRecord
from steerable.storage import JSONLSessionStore, SessionFileError
from tests.coding.conftest import SRC

FIXTURES = Path(__file__).parent / "fixtures"


def _turn(i: int) -> list[Message]:
    return [Message("user", f"q{i}"),
            Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "ls", {"path": "."}),)),
            Message("tool", "a.txt", tool_call_id=f"c{i}", name="ls", is_error=i % 2 == 0),
            Message("assistant", f"answer {i} ünïcode")]


def test_round_trip_and_info(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    assert store.load("s1") == [] and not store.exists("s1")
    store.append("s1", _turn(1), TurnRecord("t1", "completed", 2))
    store.append("s1", _turn(2), TurnRecord("t2", "completed", 2))
    assert store.load("s1") == _turn(1) + _turn(2)
    info = store.info("s1")
    assert (info.message_count, info.title) == (8, "q1")
    assert [i.session_id for i in store.list_sessions()] == ["s1"]
    lines = (tmp_path / "s1.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 5 + 5 and all('"v":1' in line for line in lines)
    assert store.delete("s1") and not store.delete("s1") and store.list_sessions() == []


def test_invalid_session_ids_are_refused(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    for bad in ["../x", ".hidden", "a/b", "", "x" * 200]:
        with pytest.raises(ValueError, match="invalid session id"):
            store.load(bad)


def test_old_format_fixture_loads_to_its_last_complete_turn(tmp_path: Path, caplog) -> None:
    shutil.copy(FIXTURES / "session_v1.jsonl", tmp_path / "old-one.jsonl")
    store = JSONLSessionStore(tmp_path)
    with caplog.at_level(logging.WARNING, "steerable.storage"):
        messages = store.load("old-one")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"] * 2
    assert messages[1].tool_calls == (ToolCall("call_1", "ls", {"path": "."}),)
    assert messages[6].is_error and messages[6].tool_call_id == "call_2"
    assert "torn last line" in caplog.text and "never finished" in caplog.text
    assert store.info("old-one").message_count == 8
    # appending after a torn tail cuts the torn bytes and keeps everything committed
    store.append("old-one", [Message("user", "again"), Message("assistant", "ok")],
                 TurnRecord("t9", "completed", 1))
    assert [m.content for m in store.load("old-one")[-3:]] == ["I was not allowed to.", "again",
                                                                "ok"]
    assert store.info("old-one").message_count == 10


def test_truncation_at_every_byte_loads_a_prefix_of_whole_turns(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    for i in range(3):
        store.append("s", _turn(i), TurnRecord(f"t{i}", "completed", 2))
    data = (tmp_path / "s.jsonl").read_bytes()
    full = store.load("s")
    logging.getLogger("steerable.storage").disabled = True
    try:
        for cut in range(len(data) + 1):
            (tmp_path / "c.jsonl").write_bytes(data[:cut])
            loaded = store.load("c")
            assert len(loaded) % 4 == 0 and loaded == full[:len(loaded)], cut
    finally:
        logging.getLogger("steerable.storage").disabled = False


def test_corruption_in_the_middle_is_an_error_and_the_file_is_untouched(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.append("s", _turn(1), TurnRecord("t1", "completed", 2))
    path = tmp_path / "s.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "garbage\n"
    path.write_text("".join(lines))
    before = path.read_bytes()
    with pytest.raises(SessionFileError, match="corrupt at line 3"):
        store.load("s")
    path.write_text('{"v": 7, "type": "session"}\n')
    with pytest.raises(SessionFileError, match="newer steerable"):
        store.load("s")
    path.write_bytes(before)
    assert path.read_bytes() == before


def test_fork_copies_a_prefix_but_never_splits_a_tool_exchange(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.append("s", _turn(1) + _turn(2), TurnRecord("t1", "completed", 2))
    assert store.fork("s", "s2", at=4) == 4 and store.load("s2") == _turn(1)
    with pytest.raises(ValueError, match="inside a tool call"):
        store.fork("s", "s3", at=2)
    with pytest.raises(ValueError, match="already exists"):
        store.fork("s", "s2")


def test_redaction_applies_to_what_is_written(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path, redact=lambda s: s.replace("sk-secret", "[redacted]"))
    store.append("s", [Message("user", "key sk-secret")], TurnRecord("t", "completed", 1))
    assert "sk-secret" not in (tmp_path / "s.jsonl").read_text()
    assert store.load("s")[0].content == "key [redacted]"


async def test_loop_saves_turns_and_rolls_back_aborts(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    provider = ScriptedProvider([Reply(text="first"), Reply(text="slow", delay=30)])
    async with AgentLoop(Agent(provider=provider), store=store) as loop:
        await loop.run_turn("hello", "s")
        handle = loop.start_turn("second", "s")
        while not provider.requests[1:]:
            await asyncio.sleep(0.01)
        loop.interrupt_hard("s")
        await handle
    assert [m.content for m in store.load("s")] == ["hello", "first"]


def test_sigkilled_writer_leaves_a_loadable_file(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{SRC.parent}"}
    rng = random.Random(4)
    store = JSONLSessionStore(tmp_path)
    start = 0
    for _round in range(4):
        proc = subprocess.Popen([sys.executable, "-m", "tests.coding._store_writer",
                                 str(tmp_path), str(start)], stdout=subprocess.PIPE, env=env,
                                cwd=SRC.parent)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        target = (tmp_path / "s.jsonl").stat().st_size + rng.randrange(10_000, 2_000_000)
        while proc.poll() is None and (tmp_path / "s.jsonl").stat().st_size < target:
            pass  # busy-wait on the file size: the kill lands at an arbitrary point of a write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        loaded = store.load("s")
        assert len(loaded) % 2 == 0 and loaded
        numbers = [int(m.content.split()[1]) for m in loaded[::2] if "check" not in m.content]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
        start = numbers[-1] + 1
        store.append("s", [Message("user", "turn -1 check"), Message("assistant", "ok")],
                     TurnRecord("check", "completed", 1))
        assert store.load("s")[-2].content == "turn -1 check"
