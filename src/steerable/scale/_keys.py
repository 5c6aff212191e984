"""Every Redis key the workers share, in one place.

A session's keys carry the ``{session}`` hash tag, like the Redis session store's, so the Lua
scripts that touch several of them (post, lease, finish) stay in one slot on Redis Cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from steerable.storage._ids import check_session_id

__all__ = ["Keys"]


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "steerable:"

    @property
    def inbox(self) -> str:
        """The stream of "this session has work" notices, read by the consumer group."""
        return f"{self.prefix}inbox"

    @property
    def group(self) -> str:
        return "workers"

    @property
    def active(self) -> str:
        """Sorted set: sessions under a lease, scored by the lease's deadline (ms). A session
        whose deadline passed belongs to a dead worker and is taken over."""
        return f"{self.prefix}active"

    def session(self, session_id: str, part: str) -> str:
        return f"{self.prefix}s:{{{check_session_id(session_id)}}}:{part}"

    def lease(self, session_id: str) -> str:
        return self.session(session_id, "lease")

    def fence(self, session_id: str) -> str:
        return self.session(session_id, "fence")

    def queue(self, session_id: str) -> str:
        """Messages waiting for the session's next turns, oldest first."""
        return self.session(session_id, "queue")

    def inflight(self, session_id: str) -> str:
        """The message whose turn is running (kept until that turn is saved)."""
        return self.session(session_id, "inflight")

    def message(self, message_id: str) -> str:
        """The session a message was given to (so it can be found by its id alone)."""
        return f"{self.prefix}m:{message_id}"

    def events(self, session_id: str) -> str:
        return self.session(session_id, "events")

    def control(self, worker_id: str) -> str:
        return f"{self.prefix}w:{worker_id}:control"

    def client_name(self, worker_id: str) -> str:
        """The name of a worker's Redis connections: while one is open, the worker lives (a
        dead process's connections close with it)."""
        return f"{self.prefix}w:{worker_id}"

    def reply(self, request_id: str) -> str:
        return f"{self.prefix}reply:{request_id}"

    def approval(self, request_id: str) -> str:
        return f"{self.prefix}approval:{request_id}"
