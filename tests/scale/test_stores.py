"""The SQLite and Redis session stores: the JSON-lines store's guarantees, shared by processes.

Every test here runs against a real SQLite file and a real redis-server (see ``tests/_redis.py``).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steerable import Agent, AgentLoop, Message, Reply, ScriptedProvider, TurnRecord, TurnStatus
from steerable.errors import ConfigurationError
from steerable.storage import (
    LeaseLostError,
    RedisSessionStore,
    RedisStoreError,
    RedisUnavailableError,
    SQLiteSessionStore,
    SQLiteStoreError,
)
from tests._redis import RedisServer
from tests.conftest import assert_history_consistent

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def target(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if store_kind == "sqlite":
        return str(tmp_path / "db" / "sessions.sqlite")
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture
def store(store_kind: str, target: str) -> Iterator[Any]:
    made = SQLiteSessionStore(target) if store_kind == "sqlite" else RedisSessionStore(target)
    yield made
    made.close()


def turn(n: int) -> list[Message]:
    return [Message("user", f"q{n}"), Message("assistant", f"a{n}")]


def test_round_trip_list_info_delete(store: Any) -> None:
    assert store.load("s") == [] and not store.exists("s")
    store.append("s", turn(1), TurnRecord("t1", "completed", 1))
    store.append("s", [*turn(2), Message("assistant", "ünïcode ✓")], TurnRecord("t2", "completed", 2))
    store.append("other", turn(9), None)
    assert [m.content for m in store.load("s")] == ["q1", "a1", "q2", "a2", "ünïcode ✓"]
    info = store.info("s")
    assert (info.session_id, info.message_count, info.title) == ("s", 5, "q1")
    assert {i.session_id for i in store.list_sessions()} == {"s", "other"}
    assert store.list_sessions()[0].session_id == "other"  # most recently updated first
    assert store.delete("s") and not store.delete("s")
    assert store.load("s") == [] and not store.exists("s")
    assert [i.session_id for i in store.list_sessions()] == ["other"]


def test_tool_calls_and_replace(store: Any) -> None:
    from steerable import ToolCall

    call = Message("assistant", "", tool_calls=(ToolCall("c1", "read", {"path": "a"}),))
    result = Message("tool", "text", tool_call_id="c1", name="read", is_error=True)
    store.append("s", [Message("user", "go"), call, result], TurnRecord("t", "completed", 2))
    assert store.load("s") == [Message("user", "go"), call, result]
    store.replace("s", [Message("user", "summary")])
    assert [m.content for m in store.load("s")] == ["summary"]
    store.append("s", turn(3), None)
    assert store.info("s").message_count == 3


def test_invalid_session_ids_are_refused(store: Any) -> None:
    for bad in ("", "../x", ".hidden", "a/b", "x" * 200, 7):
        with pytest.raises(ConfigurationError, match="invalid session id"):
            store.append(bad, turn(1), None)


def test_a_message_that_cannot_be_encoded_writes_nothing(store: Any) -> None:
    store.append("s", turn(1), None)
    bad = Message("assistant", "x", tool_calls=())
    object.__setattr__(bad, "content", object())  # not JSON: the encoder fails mid-turn
    with pytest.raises(TypeError):
        store.append("s", [Message("user", "q2"), bad], TurnRecord("t2", "completed", 1))
    assert [m.content for m in store.load("s")] == ["q1", "a1"]
    assert store.info("s").message_count == 2


def test_records_carry_their_version_and_newer_ones_are_refused(store_kind: str, target: str,
                                                                store: Any) -> None:
    store.append("s", turn(1), None)
    if store_kind == "sqlite":
        db = sqlite3.connect(target)
        assert {v for (v,) in db.execute("SELECT v FROM messages")} == {1}
        db.execute("UPDATE messages SET v=99 WHERE idx=1")
        db.commit()
        db.close()
        error: type[Exception] = SQLiteStoreError
    else:
        import redis

        client = redis.Redis.from_url(target)
        key = store.key("s", "msgs")
        assert {json.loads(r)["v"] for r in client.lrange(key, 0, -1)} == {1}
        client.lset(key, 1, json.dumps({"v": 99, "message": {}}))
        client.close()
        error = RedisStoreError
    with pytest.raises(error, match=r"schema v99.*upgrade steerable"):
        store.load("s")


def test_a_newer_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=7")
    db.close()
    before = path.read_bytes()
    with pytest.raises(SQLiteStoreError, match="newer steerable"):
        SQLiteSessionStore(path)
    assert path.read_bytes() == before


def _writer(kind: str, target: str, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.scale._store_writer", kind, target,
                             name, str(count)], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _assert_whole_turns(messages: list[Message]) -> dict[str, list[int]]:
    """Each turn is a question and its answer, next to each other; returns turn numbers by
    writer, which must each be 0, 1, 2... with no gap."""
    assert len(messages) % 2 == 0
    seen: dict[str, list[int]] = {}
    for q, a in zip(messages[::2], messages[1::2], strict=True):
        name, number = q.content.split()[:2]
        assert a.content == f"{name} {number} answer"
        seen.setdefault(name, []).append(int(number))
    for numbers in seen.values():
        assert numbers == list(range(len(numbers)))
    return seen


def test_a_writer_killed_at_random_points_leaves_whole_turns(store_kind: str, target: str,
                                                             store: Any) -> None:
    for attempt in range(3):
        proc = _writer(store_kind, target, f"w{attempt}", 0)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 + 0.07 * attempt)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        seen = _assert_whole_turns(store.load("s"))
        assert len(seen[f"w{attempt}"]) >= 1
    assert store.info("s").message_count == len(store.load("s"))


def test_several_processes_append_to_one_session(store_kind: str, target: str,
                                                 store: Any) -> None:
    procs = [_writer(store_kind, target, f"p{i}", 40) for i in range(3)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
        assert proc.stdout is not None
        proc.stdout.close()
    seen = _assert_whole_turns(store.load("s"))
    assert {name: len(numbers) for name, numbers in seen.items()} == {"p0": 40, "p1": 40, "p2": 40}
    assert store.info("s").message_count == 240


def test_guarded_writes_are_refused_once_the_lease_moved(redis_url: str) -> None:
    import redis

    store = RedisSessionStore(redis_url)
    client = redis.Redis.from_url(redis_url)
    lease = store.key("s", "lease")
    client.set(lease, "worker-a:1")
    store.append_guarded("s", turn(1), None, (lease, "worker-a:1"))
    client.set(lease, "worker-b:2")  # the session moved to another worker
    with pytest.raises(LeaseLostError, match="another worker holds"):
        store.append_guarded("s", turn(2), None, (lease, "worker-a:1"))
    with pytest.raises(LeaseLostError):
        store.replace_guarded("s", [], (lease, "worker-a:1"))
    assert [m.content for m in store.load("s")] == ["q1", "a1"]
    client.close()
    store.close()


def test_redis_down_is_a_clear_error_and_writes_nothing(own_redis: RedisServer) -> None:
    store = RedisSessionStore(own_redis.url, timeout=1.0)
    store.append("s", turn(1), None)
    own_redis.stop()
    with pytest.raises(RedisUnavailableError, match=r"did not answer.*nothing was written"):
        store.append("s", turn(2), None)
    with pytest.raises(RedisUnavailableError, match="cannot load session 's'"):
        store.load("s")
    own_redis.start()  # persistence is off: the restarted Redis is empty, and usable again
    store.append("s", turn(3), None)
    assert [m.content for m in store.load("s")] == ["q3", "a3"]
    store.close()


async def test_the_loop_saves_whole_turns_and_rolls_back_aborts(store: Any) -> None:
    agent = Agent(name="a", instructions="x", provider=ScriptedProvider(
        [Reply(text="first"), Reply(text="slow", delay=5)]))
    loop = AgentLoop(agent, store=store)
    assert (await loop.run_turn("one", session_id="s")).status is TurnStatus.COMPLETED
    handle = loop.start_turn("two", session_id="s")
    await __import__("asyncio").sleep(0.05)
    assert loop.interrupt_hard("s")
    assert (await handle).status is TurnStatus.ABORTED
    messages = store.load("s")
    assert [m.content for m in messages] == ["one", "first"]
    assert_history_consistent(messages)
    await loop.aclose()


def test_checkpoints_follow_the_contract(store: Any) -> None:
    from tests.storage.checkpoint_contract import check_checkpoint_store, sample_checkpoint

    check_checkpoint_store(store)
    store.append("s1", turn(1), None)
    store.save_checkpoint(sample_checkpoint())
    assert store.delete("s1")  # a deleted session takes its checkpoint along
    assert store.load_checkpoint("s1") is None


def test_a_corrupt_checkpoint_is_a_clear_error(store_kind: str, target: str, store: Any) -> None:
    from steerable.storage import CheckpointError
    from tests.storage.checkpoint_contract import sample_checkpoint

    store.save_checkpoint(sample_checkpoint())
    if store_kind == "sqlite":
        db = sqlite3.connect(target)
        db.execute("UPDATE checkpoints SET record='{\"v\": 99, \"type\": \"checkpoint\"}'")
        db.commit()
        db.close()
    else:
        import redis

        client = redis.Redis.from_url(target)
        client.set(store.key("s1", "checkpoint"), '{"v": 99, "type": "checkpoint"}')
        client.close()
    with pytest.raises(CheckpointError, match="newer steerable"):
        store.load_checkpoint("s1")


def test_guarded_checkpoints_are_refused_once_the_lease_moved(redis_url: str) -> None:
    import redis

    from tests.storage.checkpoint_contract import sample_checkpoint

    store = RedisSessionStore(redis_url)
    client = redis.Redis.from_url(redis_url)
    lease = store.key("s1", "lease")
    client.set(lease, "worker-b:2")
    with pytest.raises(LeaseLostError):
        store.save_checkpoint_guarded(sample_checkpoint(), (lease, "worker-a:1"))
    assert store.load_checkpoint("s1") is None
    client.close()
    store.close()


def test_a_rewrite_keeps_what_was_appended_after_its_base(store: Any) -> None:
    def turn(i: int) -> None:
        store.append("s", [Message("user", f"q{i}")], TurnRecord(f"t{i}", "completed", 1))

    turn(1)
    turn(2)
    seen = store.load("s")
    turn(3)  # saved while a summary of `seen` was being written
    store.replace("s", [Message("user", "summary"), *seen[1:]], base=len(seen))
    assert [m.content for m in store.load("s")] == ["summary", "q2", "q3"]
    assert store.info("s").message_count == 3
