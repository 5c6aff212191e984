"""The messages workers and clients exchange through Redis, and the scripts that move them.

A posted message is a queue entry ``{"id", "text", "policy", "posted"}``; the worker running
its turn adds ``"turn_id"``. ``id`` is the message's ``message_id`` for its whole life (the
turn that takes it keeps it), and ``message:<id>`` names its session, so a message can be
withdrawn or edited by its id alone while it waits in the queue. A control command is a stream entry on the worker's control stream
``{"op", "session", "args", "reply"}``; the answer is pushed to the ``reply`` list.
"""

from __future__ import annotations

import json
from typing import Any

from steerable.scale._keys import Keys

__all__ = ["POLICIES", "Scripts", "decode", "encode"]

POLICIES = ("steer", "follow_up", "interrupt", "rollback", "reject")


def encode(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode(raw: bytes | str) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


# KEYS: lease, queue, inbox   ARGV: entry, session id, inbox max length, force
# With no lease holder (or force), queue the entry and wake a worker; otherwise name the holder,
# which applies the busy policy itself. One script, so the entry and its notice go together.
_POST = """
local owner = redis.call('GET', KEYS[1])
if owner and ARGV[4] ~= '1' then return {1, owner} end
local waiting = redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'session', ARGV[2])
return {0, tostring(waiting)}
"""

# KEYS: queue, inflight, lease   ARGV: token
# The message to run next: the one in flight if a turn of it never finished (a dead worker's),
# else the oldest waiting one, moved to in-flight.
_TAKE = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
local current = redis.call('GET', KEYS[2])
if current then return {1, current} end
local entry = redis.call('LPOP', KEYS[1])
if not entry then return false end
redis.call('SET', KEYS[2], entry)
return {0, entry}
"""

# KEYS: inflight, lease   ARGV: token, entry
_MARK = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""

# KEYS: inflight, queue, lease   ARGV: token, entries to run next (in order)
# The turn is saved: drop its message and put what it left (follow-ups) at the queue's head.
_FINISH = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
for i = #ARGV, 2, -1 do redis.call('LPUSH', KEYS[2], ARGV[i]) end
redis.call('DEL', KEYS[1])
return 1
"""

# KEYS: queue, lease   ARGV: token, entry, at head ('1' or '0')
_QUEUE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
if ARGV[3] == '1' then return redis.call('LPUSH', KEYS[1], ARGV[2]) end
return redis.call('RPUSH', KEYS[1], ARGV[2])
"""


# KEYS: queue   ARGV: message id, new text ('' to withdraw it)
# A message still waiting in the queue (never the one in flight: its turn has taken it) is
# removed, or its text replaced; 1 when it was found. One script, so a worker taking the
# queue's head never runs a message that was withdrawn, nor the old text of an edited one.
_CHANGE = """
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
for i, raw in ipairs(entries) do
  local entry = cjson.decode(raw)
  if entry['id'] == ARGV[1] then
    if ARGV[2] == '' then
      redis.call('LREM', KEYS[1], 1, raw)
    else
      entry['text'] = ARGV[2]
      redis.call('LSET', KEYS[1], i - 1, cjson.encode(entry))
    end
    return 1
  end
end
return 0
"""


class Scripts:
    """The Lua scripts above, registered on one asyncio client."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.keys = keys
        self._post = client.register_script(_POST)
        self._take = client.register_script(_TAKE)
        self._mark = client.register_script(_MARK)
        self._finish = client.register_script(_FINISH)
        self._queue = client.register_script(_QUEUE)
        self._change = client.register_script(_CHANGE)

    async def post(self, session_id: str, entry: dict[str, Any], *, maxlen: int,
                   force: bool = False) -> tuple[str | None, int]:
        """Queue ``entry`` unless a worker holds the session: (holder token, 0) or
        (None, messages now waiting)."""
        k = self.keys
        held, value = await self._post(
            keys=[k.lease(session_id), k.queue(session_id), k.inbox],
            args=[encode(entry), session_id, maxlen, "1" if force else "0"])
        text = value.decode() if isinstance(value, bytes) else str(value)
        return (text, 0) if held else (None, int(text))

    async def take(self, session_id: str, token: str) -> tuple[bool, dict[str, Any]] | None:
        k = self.keys
        got = await self._take(keys=[k.queue(session_id), k.inflight(session_id),
                                     k.lease(session_id)], args=[token])
        return None if got is None else (bool(got[0]), decode(got[1]))

    async def mark(self, session_id: str, token: str, entry: dict[str, Any]) -> None:
        k = self.keys
        await self._mark(keys=[k.inflight(session_id), k.lease(session_id)],
                         args=[token, encode(entry)])

    async def finish(self, session_id: str, token: str, next_entries: list[dict[str, Any]]) -> None:
        k = self.keys
        await self._finish(keys=[k.inflight(session_id), k.queue(session_id),
                                 k.lease(session_id)],
                           args=[token, *(encode(e) for e in next_entries)])

    async def queue(self, session_id: str, token: str, entry: dict[str, Any], *,
                    at_head: bool) -> int:
        k = self.keys
        return int(await self._queue(keys=[k.queue(session_id), k.lease(session_id)],
                                     args=[token, encode(entry), "1" if at_head else "0"]))

    async def change(self, session_id: str, message_id: str, text: str | None) -> bool:
        """Withdraw (``text`` None) or edit a message waiting in the session's queue; False
        when it is not there (taken by a turn, or never queued)."""
        if text is not None and not text:
            raise ValueError("message text must not be empty")
        found = await self._change(keys=[self.keys.queue(session_id)],
                                   args=[message_id, text or ""])
        return bool(found)
