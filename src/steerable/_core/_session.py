"""Session stores: where a session's conversation lives between turns.

During a turn new messages stay in memory; the loop appends them at turn end in one call, so a
store sees whole turns only. ``blocking`` tells the loop to call the store from a worker thread
(file and database stores) or inline (memory).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from steerable._core._checkpoint import Checkpoint
from steerable._history import MessageView
from steerable._messages import Message
from steerable._records import Record, record

__all__ = ["InMemorySessionStore", "SessionInfo", "SessionStore", "TurnRecord"]


@record(kw_only=False)
class TurnRecord(Record):
    """What a store may keep about the turn whose messages it is appending."""

    turn_id: str
    status: str
    iterations: int


@record(kw_only=False)
class SessionInfo(Record):
    """What a store knows about one session."""

    session_id: str
    message_count: int
    updated: float
    title: str = ""


@runtime_checkable
class SessionStore(Protocol):
    blocking: bool

    def load(self, session_id: str) -> list[Message]:
        """The session's messages; an empty list for a session never saved."""
        ...

    def append(self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None) -> None:
        ...

    def replace(self, session_id: str, messages: Sequence[Message], *,
                base: int | None = None) -> None:
        """Rewrite the whole history (after compression or a summary), atomically.

        ``base``: how many stored messages ``messages`` was computed from. Messages appended
        after those meanwhile (another process, another turn) are kept after ``messages``: a
        rewrite never drops a saved turn. ``None`` replaces everything.
        """
        ...

    def exists(self, session_id: str) -> bool: ...

    def list_sessions(self) -> list[SessionInfo]: ...

    def delete(self, session_id: str) -> bool: ...


class InMemorySessionStore:
    """Sessions (and turn checkpoints) in dicts; the default when no store is given. Lost when
    the process ends, but another AgentLoop over the same store can resume a cancelled turn."""

    blocking = False
    checkpoint_blocking = False

    def __init__(self) -> None:
        self._sessions: dict[str, list[Message]] = {}
        self._updated: dict[str, float] = {}
        self._checkpoints: dict[str, Checkpoint] = {}
        # The index of waiting requests (``_parking.RequestIndex``): id -> session, answers.
        self._requests: dict[str, str] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._claims: set[str] = set()

    def index_requests(self, session_id: str, request_ids: Sequence[str]) -> None:
        self._requests.update(dict.fromkeys(request_ids, session_id))

    def request_session(self, request_id: str) -> str | None:
        return self._requests.get(request_id)

    def answer_request(self, request_id: str, answer: Mapping[str, Any]) -> bool:
        if request_id in self._answers:
            return False
        self._answers[request_id] = dict(answer)
        return True

    def request_answers(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {i: self._answers[i] for i in request_ids if i in self._answers}

    def waiting_requests(self) -> list[tuple[str, str]]:
        return [(i, s) for i, s in self._requests.items() if i not in self._answers]

    def claim_resume(self, checkpoint_id: str) -> bool:
        if checkpoint_id in self._claims:
            return False
        self._claims.add(checkpoint_id)
        return True

    def close_requests(self, request_ids: Sequence[str]) -> None:
        for i in request_ids:
            self._requests.pop(i, None)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._checkpoints[checkpoint.session_id] = checkpoint  # frozen: no copy needed

    def load_checkpoint(self, session_id: str) -> Checkpoint | None:
        return self._checkpoints.get(session_id)

    def delete_checkpoint(self, session_id: str) -> bool:
        return self._checkpoints.pop(session_id, None) is not None

    def load(self, session_id: str) -> list[Message]:
        return list(self._sessions.get(session_id, ()))

    def snapshot(self, session_id: str) -> MessageView[Message]:
        """The session's messages as they are now, read-only, in O(1) (no copy).

        Safe because a session's list only ever grows at the end here (``replace`` and
        ``delete`` put a new list in its place), and the view is bounded to today's length."""
        return MessageView.of(self._sessions.get(session_id, ()))

    def append(self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None) -> None:
        self._sessions.setdefault(session_id, []).extend(messages)
        self._updated[session_id] = time.time()

    def replace(self, session_id: str, messages: Sequence[Message], *,
                base: int | None = None) -> None:
        kept = self._sessions.get(session_id, [])[base:] if base is not None else []
        self._sessions[session_id] = [*messages, *kept]
        self._updated[session_id] = time.time()

    def exists(self, session_id: str) -> bool:
        return session_id in self._sessions

    def list_sessions(self) -> list[SessionInfo]:
        out = []
        for sid, msgs in self._sessions.items():
            # As the file and database stores title a session: its first question, spaces
            # collapsed, at most 100 characters.
            title = next((" ".join(m.text.split())[:100] for m in msgs if m.role == "user"),
                         "")
            out.append(SessionInfo(sid, len(msgs), self._updated[sid], title))
        return sorted(out, key=lambda i: i.updated, reverse=True)

    def delete(self, session_id: str) -> bool:
        self._updated.pop(session_id, None)
        had_checkpoint = self._checkpoints.pop(session_id, None) is not None
        return self._sessions.pop(session_id, None) is not None or had_checkpoint
