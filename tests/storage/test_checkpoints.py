"""Checkpoint storage: the shared contract, and the JSONL file's crash and corruption cases."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from steerable import InMemorySessionStore, Message, TurnRecord
from steerable.storage import (
    CHECKPOINT_VERSION,
    CheckpointError,
    JSONLSessionStore,
    checkpoint_from_record,
    checkpoint_to_record,
)
from tests.storage.checkpoint_contract import check_checkpoint_store, sample_checkpoint

FIXTURES = Path(__file__).parent / "fixtures"


def test_memory_store_keeps_checkpoints() -> None:
    check_checkpoint_store(InMemorySessionStore())


def test_jsonl_store_keeps_checkpoints(tmp_path: Path) -> None:
    check_checkpoint_store(JSONLSessionStore(tmp_path))


def test_record_round_trip_is_plain_json() -> None:
    cp = sample_checkpoint()
    record = json.loads(json.dumps(checkpoint_to_record(cp)))
    assert record["v"] == CHECKPOINT_VERSION
    assert checkpoint_from_record(record, where="x") == cp


def test_later_checkpoints_of_a_turn_only_append(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    cp = sample_checkpoint()
    store.save_checkpoint(cp)
    path = store.checkpoint_path("s1")
    first = path.read_bytes()
    more = sample_checkpoint(seq=4, messages=(*cp.messages, Message("user", "steer")))
    store.save_checkpoint(more)
    data = path.read_bytes()
    assert data.startswith(first)  # appended, not rewritten
    assert data[len(first):].count(b"\n") == 2  # one new message, one state
    assert JSONLSessionStore(tmp_path).load_checkpoint("s1") == more  # another process reads it


def test_dropped_messages_rewrite_the_file(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    cp = sample_checkpoint()
    store.save_checkpoint(cp)
    # Compression drops the first messages: same length is possible, the prefix is not the same.
    shifted = sample_checkpoint(seq=4, messages=(*cp.messages[1:], Message("user", "x")))
    store.save_checkpoint(shifted)
    assert store.load_checkpoint("s1") == shifted


def test_a_file_changed_by_someone_else_is_rewritten_not_appended(tmp_path: Path) -> None:
    a, b = JSONLSessionStore(tmp_path), JSONLSessionStore(tmp_path)
    cp = sample_checkpoint()
    a.save_checkpoint(cp)
    other = sample_checkpoint(origin_turn_id="turn_b", seq=1)
    b.save_checkpoint(other)
    grown = sample_checkpoint(seq=4, messages=(*cp.messages, Message("user", "more")))
    a.save_checkpoint(grown)  # a's idea of the file is stale: it must not append to b's
    assert b.load_checkpoint("s1") == grown


def test_torn_write_leaves_the_previous_checkpoint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = JSONLSessionStore(tmp_path)
    cp = sample_checkpoint()
    store.save_checkpoint(cp)
    more = sample_checkpoint(seq=4, messages=(*cp.messages, Message("user", "steer")))
    store.save_checkpoint(more)
    path = store.checkpoint_path("s1")
    data = path.read_bytes()
    for cut in (len(data) - 2, len(data) - 40, data.rfind(b"\n", 0, len(data) - 1) + 5):
        path.write_bytes(data[:cut])  # a process killed in the middle of the last append
        with caplog.at_level(logging.WARNING):
            loaded = JSONLSessionStore(tmp_path).load_checkpoint("s1")
        assert loaded == cp
    assert "torn" in caplog.text


def test_corrupt_or_foreign_file_names_itself_and_the_session_still_loads(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.append("s1", [Message("user", "hi"), Message("assistant", "hello")],
                 TurnRecord("t0", "completed", 1))
    path = store.checkpoint_path("s1")
    for content in (b"garbage\n" + b'{"v":1}\n', b'{"v": 1, "type": "checkpoint"}\n',
                    b'{"hello": "world"}\n\n', b"\n"):
        path.write_bytes(content)
        with pytest.raises(CheckpointError) as info:
            store.load_checkpoint("s1")
        assert str(path) in str(info.value)
        assert "discard_checkpoint=True" in str(info.value) or "delete it" in str(info.value)
        assert [m.content for m in store.load("s1")] == ["hi", "hello"]


def test_copied_checkpoint_of_another_session_is_refused(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.save_checkpoint(sample_checkpoint("s1"))
    store.checkpoint_path("s1").rename(store.checkpoint_path("s2"))
    with pytest.raises(CheckpointError, match="belongs to session 's1'"):
        store.load_checkpoint("s2")


def test_newer_and_unknown_schema_versions_say_what_to_do(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    record = checkpoint_to_record(sample_checkpoint(), messages=False)
    path = store.checkpoint_path("s1")
    tmp_path.mkdir(exist_ok=True)
    path.write_text(json.dumps({**record, "v": CHECKPOINT_VERSION + 1}) + "\n")
    with pytest.raises(CheckpointError, match=r"newer steerable.*upgrade"):
        store.load_checkpoint("s1")
    path.write_text(json.dumps({**record, "v": 0}) + "\n")
    with pytest.raises(CheckpointError, match=r"schema v0.*discard_checkpoint=True"):
        store.load_checkpoint("s1")


def test_checkpoint_files_written_by_v1_still_load(tmp_path: Path) -> None:
    """A corpus of files written by each released schema: they must keep loading."""
    store = JSONLSessionStore(tmp_path)
    for fixture in sorted(FIXTURES.glob("*.checkpoint")):
        (tmp_path / f"{fixture.stem}.checkpoint").write_bytes(fixture.read_bytes())
        cp = store.load_checkpoint(fixture.stem)
        assert cp is not None and cp.session_id == fixture.stem
        assert cp.messages[0].role == "user"
    assert (FIXTURES / "v1-tools.checkpoint").exists()


def test_deleting_a_session_deletes_its_checkpoint(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.append("s1", [Message("user", "hi")], TurnRecord("t0", "completed", 1))
    store.save_checkpoint(sample_checkpoint())
    assert [i.session_id for i in store.list_sessions()] == ["s1"]  # not listed as a session
    assert store.delete("s1") is True
    assert store.load_checkpoint("s1") is None
    assert not store.checkpoint_path("s1").exists()
