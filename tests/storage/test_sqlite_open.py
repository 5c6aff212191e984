"""Opening a session database that another process is setting up at the same moment.

Several workers starting together open one fresh file: one of them holds its first write
transaction (the schema) while another switches the file to WAL, which SQLite refuses at once
(``database is locked``, its busy handler never asked). The store waits for it like for any
writer instead of failing its process at start."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from steerable.storage import SQLiteSessionStore, SQLiteStoreError


def _held(path: Path, seconds: float) -> threading.Thread:
    """A write transaction on the fresh file (still in rollback-journal mode), for a while."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE other (x)")
    db.execute("BEGIN IMMEDIATE")

    def release() -> None:
        time.sleep(seconds)
        db.execute("COMMIT")
        db.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_a_store_opened_while_another_process_writes_the_fresh_file_waits(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    thread = _held(path, 0.3)
    started = time.monotonic()
    store = SQLiteSessionStore(path)  # refused at once before: "database is locked"
    waited = time.monotonic() - started
    thread.join()
    assert waited >= 0.2
    assert store.load("s") == []
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_locked_past_the_timeout_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    thread = _held(path, 1.0)
    try:
        with pytest.raises(SQLiteStoreError, match=r"stayed locked for 0.2 s"):
            SQLiteSessionStore(path, timeout=0.2)
    finally:
        thread.join()
