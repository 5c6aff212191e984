"""What the in-process stores say about their sessions: list (newest first, titled), exists,
info and delete, the same for the in-memory store and the JSON-lines files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from steerable import InMemorySessionStore, Message, TurnRecord
from steerable.storage import JSONLSessionStore
from tests.storage.checkpoint_contract import sample_checkpoint


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return InMemorySessionStore() if request.param == "memory" else JSONLSessionStore(tmp_path)


def test_sessions_are_listed_newest_first_with_their_first_question_as_title(store: Any) -> None:
    long_question = "why\n  " * 40
    store.append("old", [Message("user", "first"), Message("assistant", "a")],
                 TurnRecord("t1", "completed", 1))
    time.sleep(0.02)  # distinct update times, whatever the clock's resolution
    store.append("new", [Message("user", long_question), Message("assistant", "b"),
                         Message("user", "second")], TurnRecord("t2", "completed", 1))
    listed = store.list_sessions()
    assert [(i.session_id, i.message_count) for i in listed] == [("new", 3), ("old", 2)]
    assert listed[0].title == "why " * 25 and listed[1].title == "first"
    assert listed[0].updated >= listed[1].updated > time.time() - 60
    assert store.exists("old") and not store.exists("never")


def test_a_session_without_a_user_message_has_an_empty_title() -> None:
    store = InMemorySessionStore()
    store.append("s", [Message("assistant", "hello"), Message("tool", "x", tool_call_id="c")], None)
    (info,) = store.list_sessions()
    assert (info.session_id, info.message_count, info.title) == ("s", 2, "")


def test_a_rewrite_counts_as_an_update() -> None:
    store = InMemorySessionStore()
    store.append("a", [Message("user", "qa")], None)
    store.append("b", [Message("user", "qb")], None)
    time.sleep(0.02)
    store.replace("a", [Message("user", "summary of a")])
    assert [(i.session_id, i.title) for i in store.list_sessions()] == [("a", "summary of a"),
                                                                        ("b", "qb")]


def test_delete_removes_the_session_and_its_checkpoint_and_says_whether_there_was_one(
        store: Any) -> None:
    store.append("s1", [Message("user", "hi")], TurnRecord("t0", "completed", 1))
    store.append("keep", [Message("user", "other")], None)
    store.save_checkpoint(sample_checkpoint("s1"))
    assert store.delete("s1") is True
    assert store.load("s1") == [] and not store.exists("s1")
    assert store.load_checkpoint("s1") is None
    assert [i.session_id for i in store.list_sessions()] == ["keep"]
    assert store.delete("s1") is False and store.delete("never") is False


def test_delete_of_a_session_that_only_has_a_checkpoint_says_it_deleted_something() -> None:
    store = InMemorySessionStore()
    store.save_checkpoint(sample_checkpoint("s1"))
    assert store.delete("s1") is True
    assert store.load_checkpoint("s1") is None and store.delete("s1") is False
