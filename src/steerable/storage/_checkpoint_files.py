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

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from steerable._core._checkpoint import Checkpoint
from steerable._messages import Message
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


def _line(record: dict[str, object]) -> str:
    return _encode(record) + "\n"


def _message_line(message: Message) -> str:
    return _encode({"v": SCHEMA_VERSION, "type": "message",
                    "message": message_to_record(message)}) + "\n"


class CheckpointFiles:
    """The checkpoint half of ``JSONLSessionStore`` (which owns paths and redaction)."""

    def __init__(self, path_of: Callable[[str], Path],
                 redact: Callable[[str], str] | None) -> None:
        self._path_of = path_of
        self._redact = redact
        self._written: dict[str, _Written] = {}

    def path(self, session_id: str) -> Path:
        return self._path_of(session_id).with_suffix(SUFFIX)

    # -- writing ------------------------------------------------------------------------------

    def save(self, cp: Checkpoint) -> None:
        state = _line(checkpoint_to_record(cp, messages=False))
        w = self._written.get(cp.session_id)
        if w is not None and self._can_append(w, cp):
            text = "".join(_message_line(m) for m in cp.messages[w.count:]) + state
            data = self._encode(text)
            fd = os.open(w.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            w.stale += len(state)
            w.count, w.size = len(cp.messages), w.size + len(data)
            w.last = cp.messages[-1] if cp.messages else None
            return
        self._rewrite(cp, self.path(cp.session_id), state)

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
        text = "".join(_message_line(m) for m in cp.messages) + state
        data = self._encode(text)
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._written[cp.session_id] = _Written(
            cp.origin_turn_id, len(cp.messages), cp.messages[-1] if cp.messages else None,
            os.stat(path).st_ino, len(data), str(path))

    def _encode(self, text: str) -> bytes:
        if self._redact is not None:
            text = self._redact(text)
        return text.encode("utf-8")

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
