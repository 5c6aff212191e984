"""A session store in one SQLite database (WAL), shared by several processes on one machine.

Schema (``PRAGMA user_version`` = 1)::

    sessions(session_id PRIMARY KEY, created, updated, title, count)
    messages(session_id, idx, turn, v, record)      -- record: the JSON of _records.py
    turns(session_id, turn, status, iterations, count, time)
    checkpoints(session_id PRIMARY KEY, record)     -- a running turn's checkpoint (durable turns)

A turn's messages, its ``turns`` row and the session's new ``count`` are written in one
``BEGIN IMMEDIATE`` transaction: a process killed at any point leaves the turn either whole or
absent, as the JSON-lines store does with its turn marker. WAL lets readers (``load``, ``list``)
run while another process writes; writers queue on SQLite's lock (``busy_timeout``).

Each message row keeps the schema version that wrote it (``v``), decoded by the same
versioned reader as the JSON-lines files; a newer database is refused with a clear message.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from steerable._core._checkpoint import Checkpoint
from steerable._core._session import SessionInfo, TurnRecord
from steerable._messages import Message
from steerable._secrets import redacted
from steerable.errors import ConfigurationError, SteerableError
from steerable.storage._checkpoint_records import checkpoint_from_record, checkpoint_to_record
from steerable.storage._ids import check_session_id
from steerable.storage._records import (
    SCHEMA_VERSION,
    RecordError,
    message_from_record,
    message_to_record,
    session_title,
)

__all__ = ["SQLiteSessionStore", "SQLiteStoreError"]

_DB_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, created REAL NOT NULL, updated REAL NOT NULL,
    title TEXT NOT NULL DEFAULT '', count INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL, idx INTEGER NOT NULL, turn TEXT NOT NULL,
    v INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (session_id, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL, turn TEXT NOT NULL, status TEXT NOT NULL,
    iterations INTEGER NOT NULL, count INTEGER NOT NULL, time REAL NOT NULL);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns (session_id);
CREATE TABLE IF NOT EXISTS checkpoints (
    session_id TEXT PRIMARY KEY, record TEXT NOT NULL);
"""


class SQLiteStoreError(SteerableError):
    """A database this version cannot use safely; it is left untouched."""


def _encode(record: object) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _enable_wal(db: sqlite3.Connection, timeout: float, path: Path) -> None:
    """Switch the database to WAL, waiting like any writer for a process that holds it.

    SQLite answers ``database is locked`` at once, without its busy handler, when the journal
    mode cannot change because another connection is opening the same fresh file (several
    workers starting together): retried here until ``timeout``, as ``busy_timeout`` would.
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise SQLiteStoreError(
                    f"session database {path} stayed locked for {timeout:g} s while "
                    f"opening it ({exc}); is another process holding it?") from None
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


class SQLiteSessionStore:
    """Sessions in the SQLite database at ``path`` (created with its folder when missing).

    Safe to share between threads and between processes on one machine (not over a network
    file system: SQLite's locks need a local disk). ``timeout`` is how long a writer waits for
    another process's transaction before failing. ``redact`` (a ``Redactor``) is applied to
    every string of a message or checkpoint before it is encoded.
    """

    blocking = True
    checkpoint_blocking = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0,
                 redact: Callable[[str], str] | None = None) -> None:
        self.path = Path(path).expanduser()
        self._redact = redact
        self._timeout = timeout
        self._local = threading.local()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > _DB_VERSION:
                raise SQLiteStoreError(
                    f"session database {self.path} was written by a newer steerable (schema "
                    f"v{version}, this one reads up to v{_DB_VERSION}); upgrade steerable")
            _enable_wal(db, self._timeout, self.path)
            with self._write(db):
                # Statement by statement: executescript would commit on its own.
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version={_DB_VERSION}")

    def _message(self, message: Message) -> str:
        return _encode(redacted(message_to_record(message), self._redact))

    # -- connections --------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        # One connection per thread: the loop calls blocking stores from worker threads, and a
        # sqlite3 connection must stay on the thread that made it.
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            except sqlite3.Error as exc:
                raise SQLiteStoreError(f"cannot open session database {self.path}: {exc}") from None
            db.execute("PRAGMA synchronous=NORMAL")  # durable at each commit under WAL
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        yield db

    @contextmanager
    def _write(self, db: sqlite3.Connection) -> Iterator[None]:
        """One write transaction, taken up front so two writers never deadlock on upgrade."""
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- the SessionStore protocol ------------------------------------------------------------

    def load(self, session_id: str) -> list[Message]:
        check_session_id(session_id)
        with self._connection() as db:
            rows = db.execute("SELECT idx, v, record FROM messages WHERE session_id=? "
                              "ORDER BY idx", (session_id,)).fetchall()
        out = []
        for idx, version, raw in rows:
            if version > SCHEMA_VERSION:
                raise SQLiteStoreError(
                    f"session {session_id!r} in {self.path} has a message of schema v{version}"
                    f" (this steerable reads up to v{SCHEMA_VERSION}); upgrade steerable")
            try:
                out.append(message_from_record(json.loads(raw), version))
            except (ValueError, RecordError) as exc:
                raise SQLiteStoreError(f"session {session_id!r} in {self.path} is corrupt at "
                                       f"message {idx} ({exc}); it was left untouched") from None
        return out

    def append(self, session_id: str, messages: Sequence[Message],
               turn: TurnRecord | None) -> None:
        check_session_id(session_id)
        # Encode first: a bad message writes nothing.
        rows = [self._message(m) for m in messages]
        now = time.time()
        turn_id = turn.turn_id if turn is not None else f"append_{now:.6f}"
        with self._connection() as db, self._write(db):
            count = self._count(db, session_id)
            if count is None:
                db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, 0)",
                           (session_id, now, now, session_title(messages, self._redact)))
                count = 0
            db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                           [(session_id, count + i, turn_id, SCHEMA_VERSION, raw)
                            for i, raw in enumerate(rows)])
            total = count + len(rows)
            db.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?)",
                       (session_id, turn_id, turn.status if turn else "appended",
                        turn.iterations if turn else 0, total, now))
            db.execute("UPDATE sessions SET count=?, updated=? WHERE session_id=?",
                       (total, now, session_id))

    @staticmethod
    def _count(db: sqlite3.Connection, session_id: str) -> int | None:
        row = db.execute("SELECT count FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        return None if row is None else int(row[0])

    def replace(self, session_id: str, messages: Sequence[Message], *,
                base: int | None = None) -> None:
        """Rewrite the whole history in one transaction (after compression); messages after
        the first ``base`` stored ones (appended meanwhile) are kept after ``messages``."""
        check_session_id(session_id)
        rows = [self._message(m) for m in messages]
        now = time.time()
        turn_id = f"rewrite_{now:.6f}"
        with self._connection() as db, self._write(db):
            if base is not None:
                rows += [raw for (raw,) in db.execute(
                    "SELECT record FROM messages WHERE session_id=? AND idx>=? ORDER BY idx",
                    (session_id, base))]
            if self._count(db, session_id) is None:
                db.execute("INSERT INTO sessions VALUES (?, ?, ?, '', 0)", (session_id, now, now))
            db.execute("DELETE FROM messages WHERE session_id=?", (session_id,))
            db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                           [(session_id, i, turn_id, SCHEMA_VERSION, raw)
                            for i, raw in enumerate(rows)])
            db.execute("INSERT INTO turns VALUES (?, ?, 'rewritten', 0, ?, ?)",
                       (session_id, turn_id, len(rows), now))
            db.execute("UPDATE sessions SET count=?, updated=? WHERE session_id=?",
                       (len(rows), now, session_id))

    def has_turn(self, session_id: str, turn_id: str) -> bool:
        """True once the turn ``turn_id`` of this session has been saved (a worker that takes
        over a dead worker's session asks, so that a saved turn is never run again)."""
        check_session_id(session_id)
        with self._connection() as db:
            return db.execute("SELECT 1 FROM turns WHERE session_id=? AND turn=?",
                              (session_id, turn_id)).fetchone() is not None

    def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self._connection() as db:
            return self._count(db, session_id) is not None

    def info(self, session_id: str) -> SessionInfo:
        check_session_id(session_id)
        with self._connection() as db:
            row = db.execute("SELECT count, updated, title FROM sessions WHERE session_id=?",
                             (session_id,)).fetchone()
        if row is None:
            raise ConfigurationError(f"no session {session_id!r}")
        return SessionInfo(session_id, int(row[0]), float(row[1]), str(row[2]))

    def list_sessions(self) -> list[SessionInfo]:
        with self._connection() as db:
            rows = db.execute("SELECT session_id, count, updated, title FROM sessions "
                              "ORDER BY updated DESC").fetchall()
        return [SessionInfo(str(r[0]), int(r[1]), float(r[2]), str(r[3])) for r in rows]

    def delete(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self._connection() as db, self._write(db):
            db.execute("DELETE FROM messages WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM turns WHERE session_id=?", (session_id,))
            had = db.execute("DELETE FROM checkpoints WHERE session_id=?",
                             (session_id,)).rowcount > 0
            return db.execute("DELETE FROM sessions WHERE session_id=?",
                              (session_id,)).rowcount > 0 or had

    # -- checkpoints (CheckpointStore) --------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Replace the session's checkpoint in one statement (atomic, like every write here)."""
        check_session_id(checkpoint.session_id)
        record = _encode(redacted(checkpoint_to_record(checkpoint), self._redact))
        with self._connection() as db, self._write(db):
            db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?)",
                       (checkpoint.session_id, record))

    def load_checkpoint(self, session_id: str) -> Checkpoint | None:
        check_session_id(session_id)
        with self._connection() as db:
            row = db.execute("SELECT record FROM checkpoints WHERE session_id=?",
                             (session_id,)).fetchone()
        if row is None:
            return None
        where = f"the checkpoint of session {session_id!r} in {self.path}"
        try:
            raw = json.loads(row[0])
        except ValueError:
            raw = None
        return checkpoint_from_record(raw, where=where)

    def delete_checkpoint(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self._connection() as db, self._write(db):
            return db.execute("DELETE FROM checkpoints WHERE session_id=?",
                              (session_id,)).rowcount > 0

    def __repr__(self) -> str:
        return f"<SQLiteSessionStore {self.path}>"
