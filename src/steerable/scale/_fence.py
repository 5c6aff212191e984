"""A session store wrapper that writes a session only while this worker holds its lease.

With the Redis store the check and the write are one Lua script (``append_guarded``). With
another store (SQLite on one machine) the lease is checked just before the write: a worker
paused for longer than the lease between the check and the write could still write once, which
is why the Redis store is the one to use across machines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from steerable._core._checkpoint import Checkpoint, CheckpointStore
from steerable._core._session import SessionInfo, SessionStore, TurnRecord
from steerable._messages import Message
from steerable.scale._keys import Keys
from steerable.storage.redis_store import LeaseLostError

__all__ = ["FencedCheckpointStore", "FencedStore", "fence"]


class FencedStore:
    """Delegates to ``inner``; appends and rewrites need the session's current lease token."""

    def __init__(self, inner: SessionStore, keys: Keys, sync_client: Any) -> None:
        self.inner = inner
        self.blocking = True
        self._keys = keys
        self._sync = sync_client
        self.tokens: dict[str, str] = {}
        """Lease tokens of the sessions this worker holds (written on the loop's thread, read
        from the store's worker threads: single dict operations are atomic)."""

    def _guard(self, session_id: str) -> tuple[str, str]:
        token = self.tokens.get(session_id)
        if token is None:
            raise LeaseLostError(f"this worker no longer holds session {session_id!r}; the "
                                 "turn was not written")
        return self._keys.lease(session_id), token

    def _check(self, guard: tuple[str, str]) -> None:
        current = self._sync.get(guard[0])
        if current is None or current.decode() != guard[1]:
            raise LeaseLostError("another worker holds the session's lease now; the turn was "
                                 "not written")

    def append(self, session_id: str, messages: Sequence[Message],
               turn: TurnRecord | None) -> None:
        guard = self._guard(session_id)
        guarded = getattr(self.inner, "append_guarded", None)
        if guarded is not None:
            guarded(session_id, messages, turn, guard)
            return
        self._check(guard)
        self.inner.append(session_id, messages, turn)

    def replace(self, session_id: str, messages: Sequence[Message], *,
                base: int | None = None) -> None:
        guard = self._guard(session_id)
        guarded = getattr(self.inner, "replace_guarded", None)
        if guarded is not None:
            guarded(session_id, messages, guard, base=base)
            return
        self._check(guard)
        self.inner.replace(session_id, messages, base=base)

    def has_turn(self, session_id: str, turn_id: str) -> bool:
        probe = getattr(self.inner, "has_turn", None)
        return bool(probe(session_id, turn_id)) if probe is not None else False

    def load(self, session_id: str) -> list[Message]:
        return self.inner.load(session_id)

    def exists(self, session_id: str) -> bool:
        return self.inner.exists(session_id)

    def list_sessions(self) -> list[SessionInfo]:
        return self.inner.list_sessions()

    def delete(self, session_id: str) -> bool:
        return self.inner.delete(session_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # info(), fork()... of the wrapped store


class FencedCheckpointStore(FencedStore):
    """``FencedStore`` over a store that keeps checkpoints: the worker's turns are durable,
    and a checkpoint is written only while the lease is this worker's."""

    checkpoint_blocking = True  # the lease check is a Redis round trip, whatever the store

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        guard = self._guard(checkpoint.session_id)
        guarded = getattr(self.inner, "save_checkpoint_guarded", None)
        if guarded is not None:
            guarded(checkpoint, guard)
            return
        self._check(guard)
        self._checkpoints().save_checkpoint(checkpoint)

    def load_checkpoint(self, session_id: str) -> Checkpoint | None:
        return self._checkpoints().load_checkpoint(session_id)

    def delete_checkpoint(self, session_id: str) -> bool:
        return self._checkpoints().delete_checkpoint(session_id)

    def _checkpoints(self) -> CheckpointStore:
        assert isinstance(self.inner, CheckpointStore)
        return self.inner

    # The index of waiting requests (parking), when the inner store keeps one: named here,
    # since a protocol check does not look through ``__getattr__``. Unfenced: a request is
    # indexed after its fenced checkpoint, and answers come from any process by design.

    def index_requests(self, session_id: str, request_ids: Sequence[str]) -> None:
        self.inner.index_requests(session_id, request_ids)  # type: ignore[attr-defined]

    def request_session(self, request_id: str) -> str | None:
        found: str | None = self.inner.request_session(request_id)  # type: ignore[attr-defined]
        return found

    def answer_request(self, request_id: str, answer: Mapping[str, Any]) -> bool:
        return bool(self.inner.answer_request(request_id, answer))  # type: ignore[attr-defined]

    def request_answers(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        got: dict[str, dict[str, Any]] = self.inner.request_answers(  # type: ignore[attr-defined]
            request_ids)
        return got

    def waiting_requests(self) -> list[tuple[str, str]]:
        got: list[tuple[str, str]] = self.inner.waiting_requests()  # type: ignore[attr-defined]
        return got

    def claim_resume(self, checkpoint_id: str) -> bool:
        return bool(self.inner.claim_resume(checkpoint_id))  # type: ignore[attr-defined]

    def close_requests(self, request_ids: Sequence[str]) -> None:
        self.inner.close_requests(request_ids)  # type: ignore[attr-defined]


def fence(inner: SessionStore, keys: Keys, sync_client: Any) -> FencedStore:
    """The fenced wrapper that keeps exactly the abilities of ``inner``."""
    if isinstance(inner, CheckpointStore):
        return FencedCheckpointStore(inner, keys, sync_client)
    return FencedStore(inner, keys, sync_client)
