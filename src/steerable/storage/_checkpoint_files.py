"""Checkpoint files beside JSONL sessions: ``<session id>.checkpoint``, append-only per turn.

Layout, one JSON object a line (see ``_checkpoint_records`` for the state object)::

    {"v": 1, "type": "message", "message": {...}}           the turn's messages, in order
    {"v": 1, "type": "checkpoint", ..., "count": N}         a state: its messages are the first N

A turn writes its first checkpoint as a whole new file (written to a temporary name, then
renamed over the old one). Each later checkpoint of the same turn appends only the messages
added since, then one state line, in a single ``write``: the cost follows what changed, not
the turn's length. The loader takes the last complete state line; a torn last line (a process
killed mid-write) is ignored, so a crash at any byte leaves the previous checkpoint. Nothing is
fsynced: a killed process loses nothing (the kernel has the bytes), a power cut may lose the
latest checkpoints, never the session's history.

When something else changed the file (another process, an older turn), or compression
removed messages, or stale state lines pile up, the next save rewrites the file whole.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from steerable._core._checkpoint import Checkpoint
from steerable._messages import Message
from steerable._secrets import redacted
from steerable.errors import CheckpointError
from steerable.storage._checkpoint_records import (
    CHECKPOINT_VERSION,
    checkpoint_from_record,
    checkpoint_to_record,
)
from steerable.storage._records import (
    SCHEMA_VERSION,
    RecordError,
    message_from_record,
    message_to_record,
)

__all__ = ["CheckpointFiles"]

log = logging.getLogger("steerable.storage")

SUFFIX = ".checkpoint"
_REWRITE_STALE = 256 * 1024


@dataclass(slots=True)
class _Written:
    """What this process last wrote to a checkpoint file, to append to it safely."""

    origin: str
    count: int
    last: Message | None
    inode: int
    size: int
    path: str
    stale: int = 0


# One encoder, built once: json.dumps with options builds a new one per call (a third of the
# cost of a safe point).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

_os_write = os.write  # the one place bytes reach a checkpoint file (tests inject failures here)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (a short write is followed by the rest), or raise."""
    view = memoryview(data)
    while view:
        written = _os_write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, "the checkpoint file took no more bytes")
        view = view[written:]


class CheckpointFiles:
    """The checkpoint half of ``JSONLSessionStore`` (which owns paths and redaction).

    A write is whole or undone: an append cut short (a full disk) is truncated back to where
    it began, a rewrite cut short leaves the previous file, and the error goes up to the turn,
    which reports it as an ERROR event (as the session file does). A resumer therefore never
    reads a checkpoint whose last state line lies about what was done."""

    def __init__(self, path_of: Callable[[str], Path],
                 redact: Callable[[str], str] | None) -> None:
        self._path_of = path_of
        self._redact = redact
        self._written: dict[str, _Written] = {}

    def path(self, session_id: str) -> Path:
        return self._path_of(session_id).with_suffix(SUFFIX)

    def _line(self, record: dict[str, object]) -> str:
        return _encode(redacted(record, self._redact)) + "\n"

    def _message_line(self, message: Message) -> str:
        return self._line({"v": SCHEMA_VERSION, "type": "message",
                           "message": message_to_record(message)})

    # -- writing ------------------------------------------------------------------------------

    def save(self, cp: Checkpoint) -> None:
        state = self._line(checkpoint_to_record(cp, messages=False))
        w = self._written.get(cp.session_id)
        if w is not None and self._can_append(w, cp):
            text = "".join(self._message_line(m) for m in cp.messages[w.count:]) + state
            self._append(cp, w, text.encode("utf-8"))
            w.stale += len(state)
            return
        self._rewrite(cp, self.path(cp.session_id), state)

    def _append(self, cp: Checkpoint, w: _Written, data: bytes) -> None:
        fd = os.open(w.path, os.O_WRONLY | os.O_APPEND)
        try:
            _write_all(fd, data)
        except BaseException:
            # Cut back to the last whole state (truncating frees space, so it works on a full
            # disk); if even that fails, the next save rewrites the file whole.
            try:
                os.ftruncate(fd, w.size)
            except OSError as undo:
                log.error("could not undo a failed checkpoint write to %s: %s", w.path, undo)
                self._written.pop(cp.session_id, None)
            raise
        finally:
            os.close(fd)
        w.count, w.size = len(cp.messages), w.size + len(data)
        w.last = cp.messages[-1] if cp.messages else None

    def _can_append(self, w: _Written, cp: Checkpoint) -> bool:
        if w.origin != cp.origin_turn_id or w.count > len(cp.messages) or w.stale > _REWRITE_STALE:
            return False
        if w.count and cp.messages[w.count - 1] is not w.last:
            return False  # compression dropped messages: the prefix on disk is not this one
        try:
            st = os.stat(w.path)
        except FileNotFoundError:
            return False
        return st.st_ino == w.inode and st.st_size == w.size

    def _rewrite(self, cp: Checkpoint, path: Path, state: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(self._message_line(m) for m in cp.messages) + state
        data = text.encode("utf-8")
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, data)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)  # the previous checkpoint stays as it was
            raise
        os.close(fd)
        os.replace(tmp, path)
        self._written[cp.session_id] = _Written(
            cp.origin_turn_id, len(cp.messages), cp.messages[-1] if cp.messages else None,
            os.stat(path).st_ino, len(data), str(path))

    def delete(self, session_id: str) -> bool:
        self._written.pop(session_id, None)
        try:
            self.path(session_id).unlink()
        except FileNotFoundError:
            return False
        return True

    # -- reading ------------------------------------------------------------------------------

    def load(self, session_id: str) -> Checkpoint | None:
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint file {path}: {exc.strerror}") from None
        lines = data.split(b"\n")
        messages: list[Message] = []
        state: dict[str, object] | None = None
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                if not isinstance(record, dict):
                    raise RecordError("not an object")
                if record.get("type") == "message":
                    messages.append(message_from_record(record.get("message"),
                                                        int(record.get("v", 0))))
                elif record.get("type") == "checkpoint":
                    _check_state(record, path)
                    state = record
                else:
                    raise RecordError(f"unknown record type {record.get('type')!r}")
            except (ValueError, TypeError) as exc:
                if isinstance(exc, CheckpointError):
                    raise
                if number == len(lines):  # no newline after it: a torn write, keep the last state
                    log.warning("%s: ignoring a torn last line (an interrupted write)", path)
                    break
                raise CheckpointError(
                    f"checkpoint file {path} is corrupt at line {number} ({exc}); delete it or "
                    "start the next turn with discard_checkpoint=True (the session's history "
                    "is unaffected)") from None
        if state is None:
            raise CheckpointError(
                f"checkpoint file {path} holds no checkpoint; delete it or start the next turn "
                "with discard_checkpoint=True (the session's history is unaffected)")
        count = state.get("count")
        if not isinstance(count, int) or not 0 <= count <= len(messages):
            raise CheckpointError(f"checkpoint file {path} is corrupt (its state counts {count!r} "
                                  f"messages, {len(messages)} are there); delete it")
        cp = checkpoint_from_record(state, where=f"checkpoint file {path}",
                                    messages=messages[:count])
        if cp.session_id != session_id:
            raise CheckpointError(f"checkpoint file {path} belongs to session {cp.session_id!r}; "
                                  "it was copied or renamed: delete it")
        return cp


def _check_state(record: dict[str, object], path: Path) -> None:
    version = record.get("v")
    if not isinstance(version, int) or version != CHECKPOINT_VERSION:
        # Let the shared decoder phrase it (newer: upgrade; older or foreign: discard).
        checkpoint_from_record(record, where=f"checkpoint file {path}", messages=[])
