"""Session leases: at most one worker runs a session's turns, and a dead worker's lease ends.

A lease is the key ``lease`` holding ``"<worker id>:<fence>"`` with a deadline (``PX``). The
fence is a per-session counter bumped at each acquisition, so a token is never reused: a worker
that was paused past its deadline finds a different token there and knows it lost the session
(the Redis store's guarded append refuses its write). The holder renews every third of the
lease time; the ``active`` sorted set mirrors each deadline so that a sweeper finds the sessions
of dead workers with one range query instead of scanning keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from steerable.scale._keys import Keys

__all__ = ["LeaseScripts", "LeaseTiming"]


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """``ttl``: seconds a lease lives without renewal, which bounds failover (a dead worker's
    sessions move within about ``ttl`` plus one ``sweep``). ``renew``: how often the holder
    renews (default a third of ``ttl``, so two renewals can fail before the lease ends)."""

    ttl: float = 5.0
    renew: float | None = None
    sweep: float | None = None

    def __post_init__(self) -> None:
        if not 0.2 <= self.ttl <= 3600:
            raise ValueError(f"lease ttl must be between 0.2 and 3600 seconds, got {self.ttl}")

    @property
    def renew_every(self) -> float:
        return self.renew if self.renew is not None else self.ttl / 3

    @property
    def sweep_every(self) -> float:
        return self.sweep if self.sweep is not None else self.ttl / 4

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)


# KEYS: lease, fence, active   ARGV: worker id, ttl ms, session id, now ms
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = ARGV[1] .. ':' .. redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
redis.call('ZADD', KEYS[3], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[3])
return token
"""

# KEYS: lease, active, fence   ARGV: token, ttl ms, session id, now ms
# A lease that vanished together with its fence counter means Redis lost its data (restarted
# without persistence), not that the lease expired: the holder puts it back and carries on.
_RENEW = """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  if current or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
  redis.call('SET', KEYS[3], string.match(ARGV[1], ':(%d+)$'))
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[3])
return 1
"""

# KEYS: lease, active, queue, inflight   ARGV: token, session id
# Returns the number of messages still waiting: the releaser takes the lease again when some
# arrived after its last look (their poster saw the lease held and left the work to it).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
end
return redis.call('LLEN', KEYS[3]) + redis.call('EXISTS', KEYS[4])
"""


class LeaseScripts:
    """The lease operations as atomic Lua scripts on an asyncio redis client."""

    def __init__(self, client: Any, keys: Keys, timing: LeaseTiming) -> None:
        self.keys = keys
        self.timing = timing
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    async def acquire(self, session_id: str, worker_id: str) -> str | None:
        """The new lease token, or None when another worker holds the session."""
        k = self.keys
        token = await self._acquire(
            keys=[k.lease(session_id), k.fence(session_id), k.active],
            args=[worker_id, self.timing.ttl_ms, session_id, int(time.time() * 1000)])
        return None if token is None else token.decode() if isinstance(token, bytes) else token

    async def renew(self, session_id: str, token: str) -> bool:
        k = self.keys
        return bool(await self._renew(keys=[k.lease(session_id), k.active, k.fence(session_id)],
                                      args=[token, self.timing.ttl_ms, session_id,
                                            int(time.time() * 1000)]))

    async def release(self, session_id: str, token: str) -> int:
        """Give the session up; returns how much work is waiting for it."""
        k = self.keys
        return int(await self._release(
            keys=[k.lease(session_id), k.active, k.queue(session_id), k.inflight(session_id)],
            args=[token, session_id]))
