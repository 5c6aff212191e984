"""The default session store: one append-only JSON-lines file per session.

Layout of ``<data dir>/sessions/<session id>.jsonl``, one record per line::

    {"v": 1, "type": "session", "session_id": ..., "created": ..., "title": ...}
    {"v": 1, "type": "message", "turn": "turn_...", "message": {...}}     (one per message)
    {"v": 1, "type": "turn", "turn": "turn_...", "status": ..., "count": N, "time": ...}

A turn's messages and its ``turn`` marker are written with one ``write`` and fsynced. The
marker is the commit: the loader keeps only messages whose turn has a marker, so a process
killed at any byte leaves a file that loads to its last complete turn. A torn last line (of any
length) is ignored with a logged warning; before the next write it is cut off (it belongs to a
turn that never committed), so torn bytes never end up in the middle of a file. A write that
fails (a full disk) is undone at once: the file is cut back to its size before the write, as if
it never started. Corruption anywhere else raises ``SessionFileError`` and the file is left
untouched.

Every write (append and rewrite) holds the same exclusive ``flock`` on the session file. A
rewrite swaps in a new file, so a writer that was waiting on the old one notices (its inode is
no longer the path's) and takes the lock again on the new one; and a rewrite keeps the messages
appended after the history it was computed from (``base``), so none are lost.

A running (or cancelled, or killed) turn's checkpoint lives beside the session, in
``<session id>.checkpoint`` (see ``_checkpoint_files``); it is not history, and deleting the
session deletes it too. So do the images and files of its messages, in ``<session id>.blobs/``
(see ``_blobs``): a history line holds their hash.

Appending never reads or rewrites earlier turns: the marker's running ``count`` is found by
reading the file's tail, so a turn costs the same with 1 or 10,000 messages before it.
"""

from __future__ import annotations

import fcntl
import gc
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from steerable._core._checkpoint import Checkpoint
from steerable._core._session import SessionInfo, TurnRecord
from steerable._messages import Message
from steerable._secrets import redacted
from steerable.errors import ConfigurationError, SteerableError
from steerable.storage._blobs import BlobFolder
from steerable.storage._checkpoint_files import CheckpointFiles
from steerable.storage._records import (
    SCHEMA_VERSION,
    BlobReader,
    RecordError,
    message_from_record,
    message_to_record,
    session_title,
)
from steerable.storage._request_files import RequestFiles

__all__ = ["JSONLSessionStore", "SessionFileError", "TurnMark", "default_data_dir"]

log = logging.getLogger("steerable.storage")

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_TAIL = 64 * 1024
DATA_DIR_ENV = "STEERABLE_DATA_DIR"


class SessionFileError(SteerableError):
    """A session file that cannot be read safely; it is left exactly as it was."""


def default_data_dir() -> Path:
    """``$STEERABLE_DATA_DIR``, else the platform's user data folder (via platformdirs)."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs
    except ModuleNotFoundError:
        raise ConfigurationError(
            "the default session folder needs platformdirs: pip install 'steerable[cli]', "
            f"or pass a directory, or set {DATA_DIR_ENV}"
        ) from None
    return Path(platformdirs.user_data_dir("steerable", appauthor=False))


@dataclass(frozen=True, slots=True)
class TurnMark:
    """A committed turn of a session file: its id, the index of its first message, when it
    was saved and how it ended (a rewrite after compaction or a fork is one turn)."""

    turn_id: str
    start: int
    time: float
    status: str
    iterations: int = 0
    """LLM calls the turn made (0 for appended messages)."""


@dataclass(slots=True)
class _Parsed:
    """A session file read back, assembled turn by turn: a turn's messages count only once
    the turn marker that commits them has been read."""

    messages: list[Message] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    last_marker: dict[str, Any] | None = None
    turns: list[TurnMark] = field(default_factory=list)
    dropped: int = 0
    torn: bool = False
    _pending: list[Message] = field(default_factory=list)
    _pending_turn: object = None

    def add_message(self, turn: object, message: Message) -> None:
        if turn != self._pending_turn:  # an earlier turn never got its marker
            self.dropped += len(self._pending)
            self._pending, self._pending_turn = [], turn
        self._pending.append(message)

    def add_marker(self, record: dict[str, Any]) -> None:
        if record.get("turn") == self._pending_turn:
            self.turns.append(TurnMark(str(record.get("turn")), len(self.messages),
                                       float(record.get("time", 0.0)), str(record.get("status")),
                                       int(record.get("iterations") or 0)))
            self.messages.extend(self._pending)
        else:
            self.dropped += len(self._pending)
        self._pending, self._pending_turn = [], None
        self.last_marker = record

    def finish(self, where: str) -> _Parsed:
        self.dropped += len(self._pending)
        self._pending = []
        if self.dropped:
            log.warning("%signoring %d message(s) of a turn that never finished", where,
                        self.dropped)
        return self


def _write_or_undo(fh: IO[bytes], size: int, data: bytes) -> None:
    """Append ``data`` durably, or leave the file at ``size`` bytes and raise."""
    try:
        view = memoryview(data)
        while view:
            written = _os_write(fh.fileno(), view)
            view = view[written:]
        os.fsync(fh.fileno())
    except BaseException:
        # A full disk (or any failure) part way: cut back to where this write started, so
        # the file is as if it never began. Truncating frees space, so it works on a full disk.
        try:
            os.ftruncate(fh.fileno(), size)
            os.fsync(fh.fileno())
        except OSError as undo:
            log.error("could not undo a failed write to the session file: %s", undo)
        raise


_os_write = os.write  # the one place bytes reach a session file (tests inject failures here)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


class JSONLSessionStore:
    """Sessions as append-only JSON-lines files under ``directory`` (default: user data dir).

    ``redact`` is applied to every string of every record before it is encoded (the CLI uses
    a ``Redactor`` to blank API keys that a tool might have printed): values, never the encoded
    line, so a file always parses.
    """

    blocking = True
    checkpoint_blocking = False  # safe points append a few hundred bytes, unsynced

    def __init__(self, directory: str | os.PathLike[str] | None = None, *,
                 redact: Callable[[str], str] | None = None) -> None:
        base = Path(directory) if directory is not None else default_data_dir() / "sessions"
        self.directory = base.expanduser()
        self._redact = redact
        self._checkpoints = CheckpointFiles(self.path, redact)
        # Session ids never start with a dot: this folder cannot clash with a session.
        self.requests = RequestFiles(self.directory / ".requests")
        self.index_requests = self.requests.index_requests
        self.request_session = self.requests.request_session
        self.answer_request = self.requests.answer_request
        self.request_answers = self.requests.request_answers
        self.waiting_requests = self.requests.waiting_requests
        self.claim_resume = self.requests.claim_resume
        self.close_requests = self.requests.close_requests

    def _line(self, record: dict[str, Any]) -> str:
        return _line(redacted(record, self._redact))

    # -- paths --------------------------------------------------------------------------------

    def path(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
            raise ConfigurationError(
                f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' "
                "(at most 128, not starting with a dot)"
            )
        return self.directory / f"{session_id}.jsonl"

    def _blobs_of(self, path: Path) -> BlobFolder:
        return BlobFolder(path.with_suffix(".blobs"), path)

    # -- reading ------------------------------------------------------------------------------

    def load(self, session_id: str) -> list[Message]:
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionFileError(f"cannot read session file {path}: {exc.strerror}") from None
        return self._parse(data, path).messages

    def turns(self, session_id: str) -> list[TurnMark]:
        """The session's committed turns, in order (what rewinding by turn needs)."""
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        return self._parse(data, path).turns

    def header(self, session_id: str) -> dict[str, Any]:
        path = self.path(session_id)
        with path.open("rb") as fh:
            first = fh.readline(_TAIL)
        try:
            record = json.loads(first)
        except ValueError:
            return {}
        return record if isinstance(record, dict) and record.get("type") == "session" else {}

    def _parse(self, data: bytes, path: Path) -> _Parsed:
        # Tens of thousands of fresh dicts would trigger the cyclic GC over and over (a third
        # of the load time); none of them can form a cycle, so it is paused meanwhile.
        paused = gc.isenabled()
        gc.disable()
        try:
            blobs = self._blobs_of(path).read
            fast = self._parse_fast(data, blobs)
            return fast if fast is not None else self._parse_lines(data, path, blobs)
        finally:
            if paused:
                gc.enable()

    def _parse_fast(self, data: bytes, blobs: BlobReader) -> _Parsed | None:
        """The common case, a clean file, in one ``json.loads`` call (3x faster than a call
        per line). Any surprise returns None and the careful line-by-line parser takes over,
        with its exact diagnostics. Raw newlines occur only between records: JSON escapes
        them inside strings."""
        if not data.endswith(b"\n"):
            return None
        try:
            records = json.loads(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]")
        except ValueError:
            return None
        out = _Parsed()
        for record in records:
            if not isinstance(record, dict) or record.get("v") != SCHEMA_VERSION:
                return None
            kind = record.get("type")
            if kind == "message":
                try:
                    out.add_message(record.get("turn"), message_from_record(
                        record.get("message"), SCHEMA_VERSION, blobs))
                except RecordError:
                    return None
            elif kind == "turn":
                out.add_marker(record)
            elif kind == "session":
                out.header = record
            else:
                return None
        return out.finish("")

    def _parse_lines(self, data: bytes, path: Path, blobs: BlobReader) -> _Parsed:
        out = _Parsed()
        lines = data.split(b"\n")
        last_index = len(lines) - 1
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                kind, version = self._check(record, path)
            except (ValueError, RecordError) as exc:
                if number - 1 == last_index:  # no newline after it: a torn write
                    log.warning("%s: ignoring a torn last line (an interrupted write)", path)
                    out.torn = True
                    continue
                raise SessionFileError(
                    f"session file {path} is corrupt at line {number} ({exc}); it was left "
                    "untouched") from None
            if kind == "session":
                out.header = record
            elif kind == "message":
                try:
                    message = message_from_record(record.get("message"), version, blobs)
                except RecordError as exc:
                    raise SessionFileError(f"session file {path} is corrupt at line {number} "
                                           f"({exc}); it was left untouched") from None
                out.add_message(record.get("turn"), message)
            elif kind == "turn":
                out.add_marker(record)
        return out.finish(f"{path}: ")

    @staticmethod
    def _check(record: Any, path: Path) -> tuple[str, int]:
        if not isinstance(record, dict) or not isinstance(record.get("v"), int):
            raise RecordError("not a steerable session record")
        version: int = record["v"]
        if version > SCHEMA_VERSION:
            raise SessionFileError(
                f"session file {path} was written by a newer steerable (schema v{version}, this "
                f"one reads up to v{SCHEMA_VERSION}); upgrade steerable to open it")
        kind = record.get("type")
        if kind not in ("session", "message", "turn"):
            raise RecordError(f"unknown record type {kind!r}")
        return str(kind), version

    # -- writing ------------------------------------------------------------------------------

    @contextmanager
    def _locked(self, path: Path) -> Iterator[IO[bytes]]:
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            fh = os.fdopen(fd, "r+b")
            try:
                # One writer at a time per file, across processes: a chat and a `run --session`
                # on the same session must not interleave their turns.
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    current = os.stat(path).st_ino
                except FileNotFoundError:
                    current = -1
                if current != os.fstat(fd).st_ino:
                    continue  # a rewrite swapped the file while we waited: lock the new one
                yield fh
                return
            finally:
                fh.close()  # closing the descriptor releases the lock

    def append(self, session_id: str, messages: Sequence[Message],
               turn: TurnRecord | None) -> None:
        path = self.path(session_id)
        is_new = not path.exists()
        with self._locked(path) as fh:
            size = self._cut_torn_tail(fh)
            count = self._tail_count(fh, size, path)
            now = time.time()
            lines = []
            if size == 0:
                lines.append(self._line({"v": SCHEMA_VERSION, "type": "session",
                                         "session_id": session_id, "created": now,
                                         "title": session_title(messages, self._redact)}))
            turn_id = turn.turn_id if turn is not None else f"append_{now:.6f}"
            blobs: dict[str, bytes] = {}
            for message in messages:
                lines.append(self._line({"v": SCHEMA_VERSION, "type": "message", "turn": turn_id,
                                    "message": message_to_record(message, blobs)}))
            self._blobs_of(path).put(blobs)  # before the lines that refer to them
            lines.append(self._line({"v": SCHEMA_VERSION, "type": "turn", "turn": turn_id,
                                "status": turn.status if turn else "appended",
                                "iterations": turn.iterations if turn else 0,
                                "count": count + len(messages), "time": now}))
            _write_or_undo(fh, size, "".join(lines).encode("utf-8"))
        if is_new:
            self._sync_directory()

    def _cut_torn_tail(self, fh: IO[bytes]) -> int:
        """Drop a partial last line left by a killed writer, however long; returns the size."""
        size = fh.seek(0, os.SEEK_END)
        end = size
        while end > 0:  # back to the last newline, a window at a time
            start = max(0, end - _TAIL)
            fh.seek(start)
            window = fh.read(end - start)
            if end == size and window.endswith(b"\n"):
                return size
            cut = window.rfind(b"\n")
            if cut != -1:
                end = start + cut + 1
                break
            end = start
        if end < size:
            log.warning("cutting %d bytes of an interrupted write off the session file",
                        size - end)
            fh.truncate(end)
        return end

    def _tail_count(self, fh: IO[bytes], size: int, path: Path) -> int:
        """The message count of the last committed turn, read from the end of the file."""
        if size == 0:
            return 0
        fh.seek(max(0, size - _TAIL))
        for raw in reversed(fh.read().split(b"\n")):
            if b'"type":"turn"' in raw:
                try:
                    return int(json.loads(raw)["count"])
                except (ValueError, KeyError, TypeError):
                    break
        # The last marker is far back (a huge unfinished turn): count the slow way, once.
        fh.seek(0)
        return len(self._parse(fh.read(), path).messages)

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, session_id: str, messages: Sequence[Message], *,
                base: int | None = None) -> None:
        """Rewrite the session (after compression) into a new file, then swap it in.

        ``base``: how many stored messages ``messages`` was computed from; messages appended
        after those (by another process, meanwhile) are kept after ``messages``.
        """
        path = self.path(session_id)
        with self._locked(path) as fh:
            size = self._cut_torn_tail(fh)
            fh.seek(0)
            data = fh.read(size)
            parsed = self._parse(data, path)
            kept = parsed.messages[base:] if base is not None else []
            fd, tmp = tempfile.mkstemp(prefix=f".{session_id}.", suffix=".jsonl.tmp",
                                       dir=self.directory)
            os.close(fd)
            try:
                keys = self._write_new(Path(tmp), session_id, parsed.header, [*messages, *kept])
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._blobs_of(path).keep_only(keys)
        self._sync_directory()

    def _write_new(self, target: Path, session_id: str, header: dict[str, Any],
                   messages: Sequence[Message]) -> set[str]:
        """Write a new session file at ``target``; returns the blob keys it refers to."""
        now = time.time()
        head = dict(header) or {"v": SCHEMA_VERSION, "type": "session",
                                "session_id": session_id, "created": now, "title": ""}
        head.update(v=SCHEMA_VERSION, session_id=session_id)
        turn_id = f"rewrite_{now:.6f}"
        lines = [self._line(head)]
        blobs: dict[str, bytes] = {}
        lines += [self._line({"v": SCHEMA_VERSION, "type": "message", "turn": turn_id,
                         "message": message_to_record(m, blobs)}) for m in messages]
        self._blobs_of(self.path(session_id)).put(blobs)
        lines.append(self._line({"v": SCHEMA_VERSION, "type": "turn", "turn": turn_id,
                            "status": "rewritten", "iterations": 0, "count": len(messages),
                            "time": now}))
        text = "".join(lines)
        with target.open("wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        return set(blobs)

    # -- the rest of the protocol -------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).exists()

    def delete(self, session_id: str) -> bool:
        had_checkpoint = self._checkpoints.delete(session_id)
        self._blobs_of(self.path(session_id)).delete()
        try:
            self.path(session_id).unlink()
        except FileNotFoundError:
            return had_checkpoint
        return True

    # -- checkpoints (CheckpointStore) --------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._checkpoints.save(checkpoint)

    def load_checkpoint(self, session_id: str) -> Checkpoint | None:
        return self._checkpoints.load(session_id)

    def delete_checkpoint(self, session_id: str) -> bool:
        return self._checkpoints.delete(session_id)

    def checkpoint_path(self, session_id: str) -> Path:
        return self._checkpoints.path(session_id)

    def info(self, session_id: str) -> SessionInfo:
        path = self.path(session_id)
        stat = path.stat()
        with path.open("rb") as fh:
            count = self._tail_count(fh, stat.st_size, path)
        return SessionInfo(session_id, count, stat.st_mtime,
                           str(self.header(session_id).get("title", "")))

    def list_sessions(self) -> list[SessionInfo]:
        if not self.directory.is_dir():
            return []
        out = []
        for path in self.directory.glob("*.jsonl"):
            try:
                out.append(self.info(path.stem))
            except (OSError, ConfigurationError, SessionFileError) as exc:
                log.warning("skipping %s: %s", path, exc)
        return sorted(out, key=lambda i: i.updated, reverse=True)

    def fork(self, session_id: str, new_id: str, at: int | None = None) -> int:
        """Copy the first ``at`` messages (all by default) into ``new_id``; returns how many."""
        messages = self.load(session_id)
        if not messages and not self.exists(session_id):
            raise ConfigurationError(f"no session {session_id!r}")
        if self.exists(new_id):
            raise ConfigurationError(f"session {new_id!r} already exists")
        cut = len(messages) if at is None else at
        if not 0 < cut <= len(messages):
            raise ConfigurationError(f"--at must be between 1 and {len(messages)}, got {cut}")
        if messages[cut - 1].tool_calls or (cut < len(messages)
                                            and messages[cut].role == "tool"):
            raise ConfigurationError(
                f"message {cut} is inside a tool call and its results; fork before the call or "
                "after its results")
        self.append(new_id, messages[:cut], TurnRecord(f"fork_of_{session_id}", "forked", 0))
        return cut

    def __repr__(self) -> str:
        return f"<JSONLSessionStore {self.directory}>"
