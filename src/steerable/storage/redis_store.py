"""A session store in Redis, shared by every worker process on every machine.

Keys (``prefix`` defaults to ``steerable:``; the ``{session}`` hash tag keeps one session's keys
in one slot, so the Lua scripts below also work on Redis Cluster)::

    {prefix}s:{<id>}:msgs    list of message records  {"v": 1, "turn": ..., "message": {...}}
    {prefix}s:{<id>}:meta    hash  created, updated, title, count
    {prefix}s:{<id>}:turns   list of turn records      {"v": 1, "turn", "status", "count", ...}
    {prefix}s:{<id>}:checkpoint  the running turn's checkpoint (durable turns), one JSON value
    {prefix}sessions         sorted set of session ids by last update

A turn is appended by one Lua script, which Redis runs atomically: its messages, its turn record
and the new count land together or not at all, as with the JSON-lines store's turn marker.
``append_guarded`` adds a fence: the script first checks that a lease key still holds the
caller's token, so a worker that lost its lease (paused, partitioned) cannot write a turn over
the worker that took the session over.

Durability is Redis's: run it with AOF (``appendonly yes``) when sessions must survive a Redis
restart. This module uses redis-py's synchronous client because the store protocol is
synchronous (the loop calls it from a worker thread); the bus uses the asyncio client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from steerable._core._checkpoint import Checkpoint
from steerable._core._session import SessionInfo, TurnRecord
from steerable._messages import Message
from steerable._secrets import redacted
from steerable.errors import ConfigurationError, SteerableError
from steerable.storage._checkpoint_records import checkpoint_from_record, checkpoint_to_record
from steerable.storage._ids import check_session_id
from steerable.storage._records import (
    SCHEMA_VERSION,
    BlobReader,
    MissingBlobError,
    RecordError,
    message_from_record,
    message_to_record,
    session_title,
)

if TYPE_CHECKING:
    import redis

__all__ = ["LeaseLostError", "RedisSessionStore", "RedisStoreError", "RedisUnavailableError"]

DEFAULT_PREFIX = "steerable:"


class RedisStoreError(SteerableError):
    """Data in Redis that this version cannot read safely; it is left untouched."""


class RedisUnavailableError(SteerableError, ConnectionError):
    """Redis did not answer (down, restarting, unreachable); nothing was written. A
    ``ConnectionError``: the server answers 503."""


class LeaseLostError(SteerableError):
    """A guarded write was refused: another worker holds the session's lease now."""


# KEYS: msgs, meta, turns, index, [guard]
# ARGV: now, title, turn_id, status, iterations, guard_value, record1..recordN
_APPEND = """
if #KEYS == 5 and redis.call('GET', KEYS[5]) ~= ARGV[6] then
  return redis.error_reply('LEASE_LOST')
end
local count = tonumber(redis.call('HGET', KEYS[2], 'count') or '-1')
if count < 0 then
  redis.call('HSET', KEYS[2], 'created', ARGV[1], 'title', ARGV[2], 'count', 0)
  count = 0
end
for i = 7, #ARGV do
  redis.call('RPUSH', KEYS[1], ARGV[i])
end
local total = count + #ARGV - 6
redis.call('RPUSH', KEYS[3], cjson.encode({v=1, turn=ARGV[3], status=ARGV[4],
  iterations=tonumber(ARGV[5]), count=total, time=tonumber(ARGV[1])}))
redis.call('HSET', KEYS[2], 'count', total, 'updated', ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[1], KEYS[2])
return total
"""

# KEYS: msgs, meta, turns, index, [guard]   ARGV: now, turn_id, guard_value, record1..recordN
_REPLACE = """
if #KEYS == 5 and redis.call('GET', KEYS[5]) ~= ARGV[3] then
  return redis.error_reply('LEASE_LOST')
end
local kept = {}
if ARGV[4] ~= '' then
  kept = redis.call('LRANGE', KEYS[1], tonumber(ARGV[4]), -1)
end
redis.call('DEL', KEYS[1])
for i = 5, #ARGV do
  redis.call('RPUSH', KEYS[1], ARGV[i])
end
for _, record in ipairs(kept) do
  redis.call('RPUSH', KEYS[1], record)
end
local total = #ARGV - 4 + #kept
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[2], 'created', ARGV[1], 'title', '')
end
redis.call('RPUSH', KEYS[3], cjson.encode({v=1, turn=ARGV[2], status='rewritten',
  iterations=0, count=total, time=tonumber(ARGV[1])}))
redis.call('HSET', KEYS[2], 'count', total, 'updated', ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[1], KEYS[2])
return total
"""


def _encode(record: object) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# KEYS: checkpoint, [guard]   ARGV: record, guard value
_SAVE_CHECKPOINT = """
if #KEYS == 2 and redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('LEASE_LOST')
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""


class RedisSessionStore:
    """Sessions in the Redis at ``url`` (``redis://host:port/db``), or on a ``client`` you pass
    (a synchronous ``redis.Redis``). Needs the ``redis`` extra: ``pip install 'steerable[redis]'``.
    ``redact`` (a ``Redactor``) is applied to every string of a message or checkpoint before it
    is encoded.
    """

    blocking = True
    checkpoint_blocking = True

    def __init__(self, url: str | None = None, *, client: redis.Redis | None = None,
                 prefix: str = DEFAULT_PREFIX, timeout: float = 5.0,
                 redact: Callable[[str], str] | None = None) -> None:
        try:
            import redis as redis_lib
        except ModuleNotFoundError:
            raise ConfigurationError(
                "the Redis session store needs redis-py: pip install 'steerable[redis]'") from None
        if (url is None) == (client is None):
            raise ConfigurationError("RedisSessionStore needs exactly one of url= or client=")
        self.url = url or "<client>"
        self._redact = redact
        self.prefix = prefix
        self._errors: tuple[type[BaseException], ...] = (redis_lib.ConnectionError,
                                                          redis_lib.TimeoutError)
        self._response_error = redis_lib.ResponseError
        self._redis: redis.Redis = client if client is not None else redis_lib.Redis.from_url(
            url or "", socket_timeout=timeout, socket_connect_timeout=timeout,
            health_check_interval=30)
        self._append = self._redis.register_script(_APPEND)
        self._replace = self._redis.register_script(_REPLACE)
        self._save_checkpoint = self._redis.register_script(_SAVE_CHECKPOINT)

    def _record(self, message: Message, turn_id: str, blobs: dict[str, bytes]) -> str:
        return _encode(redacted({"v": SCHEMA_VERSION, "turn": turn_id,
                                 "message": message_to_record(message, blobs)}, self._redact))

    def _put_blobs(self, session_id: str, blobs: dict[str, bytes]) -> None:
        """Images and files go in the session's ``blobs`` hash (by SHA-256) before the history
        entries that refer to them; a write that then fails leaves only unreferenced blobs."""
        if blobs:
            self._run(f"append to session {session_id!r}", self._redis.hset,
                      self.key(session_id, "blobs"), mapping=blobs)

    def _blob_reader(self, session_id: str) -> BlobReader:
        def read(key: str) -> bytes:
            data = self._run("read Redis", self._redis.hget, self.key(session_id, "blobs"), key)
            if data is None:
                raise MissingBlobError(
                    f"session {session_id!r} in Redis refers to an image or file stored as "
                    f"{key}, which is missing from {self.key(session_id, 'blobs')}")
            return bytes(data)
        return read

    # -- keys ---------------------------------------------------------------------------------

    def key(self, session_id: str, part: str) -> str:
        return f"{self.prefix}s:{{{check_session_id(session_id)}}}:{part}"

    def _keys(self, session_id: str) -> list[str]:
        return [self.key(session_id, "msgs"), self.key(session_id, "meta"),
                self.key(session_id, "turns"), f"{self.prefix}sessions"]

    def _run(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except self._errors as exc:
            raise RedisUnavailableError(
                f"cannot {what}: Redis at {self.url} did not answer ({exc}); nothing was written"
                if what.startswith(("append", "replace", "delete")) else
                f"cannot {what}: Redis at {self.url} did not answer ({exc})") from None
        except self._response_error as exc:
            if "LEASE_LOST" in str(exc):
                raise LeaseLostError(
                    f"cannot {what}: another worker holds the session's lease now; the turn was "
                    "not written") from None
            raise

    # -- the SessionStore protocol ------------------------------------------------------------

    def load(self, session_id: str) -> list[Message]:
        raw = self._run(f"load session {session_id!r}", self._redis.lrange,
                        self.key(session_id, "msgs"), 0, -1)
        out = []
        blobs = self._blob_reader(session_id)
        for index, item in enumerate(raw):
            try:
                record = json.loads(item)
                version = record["v"]
                if not isinstance(version, int):
                    raise RecordError("no schema version")
                if version > SCHEMA_VERSION:
                    raise RedisStoreError(
                        f"session {session_id!r} has a message of schema v{version} (this "
                        f"steerable reads up to v{SCHEMA_VERSION}); upgrade steerable")
                out.append(message_from_record(record["message"], version, blobs))
            except (ValueError, KeyError, TypeError, RecordError) as exc:
                raise RedisStoreError(f"session {session_id!r} in Redis is corrupt at message "
                                      f"{index} ({exc}); it was left untouched") from None
        return out

    def append(self, session_id: str, messages: Sequence[Message],
               turn: TurnRecord | None) -> None:
        self._append_turn(session_id, messages, turn, None)

    def append_guarded(self, session_id: str, messages: Sequence[Message],
                       turn: TurnRecord | None, guard: tuple[str, str]) -> None:
        """``append``, only while the key ``guard[0]`` holds ``guard[1]`` (a lease fence);
        raises ``LeaseLostError`` and writes nothing otherwise."""
        self._append_turn(session_id, messages, turn, guard)

    def _append_turn(self, session_id: str, messages: Sequence[Message],
                     turn: TurnRecord | None, guard: tuple[str, str] | None) -> None:
        now = time.time()
        turn_id = turn.turn_id if turn is not None else f"append_{now:.6f}"
        keys = self._keys(session_id) + ([guard[0]] if guard else [])
        args: list[Any] = [repr(now), session_title(messages, self._redact), turn_id,
                           turn.status if turn else "appended", turn.iterations if turn else 0,
                           guard[1] if guard else ""]
        blobs: dict[str, bytes] = {}
        args += [self._record(m, turn_id, blobs) for m in messages]
        self._put_blobs(session_id, blobs)
        self._run(f"append to session {session_id!r}", self._append, keys=keys, args=args)

    def replace(self, session_id: str, messages: Sequence[Message], *,
                base: int | None = None) -> None:
        self.replace_guarded(session_id, messages, None, base=base)

    def replace_guarded(self, session_id: str, messages: Sequence[Message],
                        guard: tuple[str, str] | None, *, base: int | None = None) -> None:
        """Rewrite the whole history atomically (after compression), fenced like
        ``append_guarded`` when ``guard`` is given; messages after the first ``base`` stored
        ones (appended meanwhile) are kept after ``messages``."""
        now = time.time()
        turn_id = f"rewrite_{now:.6f}"
        keys = self._keys(session_id) + ([guard[0]] if guard else [])
        args: list[Any] = [repr(now), turn_id, guard[1] if guard else "",
                           "" if base is None else str(base)]
        blobs: dict[str, bytes] = {}
        args += [self._record(m, turn_id, blobs) for m in messages]
        self._put_blobs(session_id, blobs)
        self._run(f"replace session {session_id!r}", self._replace, keys=keys, args=args)

    def has_turn(self, session_id: str, turn_id: str) -> bool:
        """True once the turn ``turn_id`` of this session has been saved (a worker that takes
        over a dead worker's session asks, so that a saved turn is never run again). Looks at
        the last 64 turns: a taken-over turn is always among the newest."""
        raw = self._run("read Redis", self._redis.lrange, self.key(session_id, "turns"), -64, -1)
        return any(json.loads(item).get("turn") == turn_id for item in raw)

    def exists(self, session_id: str) -> bool:
        return bool(self._run("read Redis", self._redis.exists, self.key(session_id, "meta")))

    def info(self, session_id: str) -> SessionInfo:
        meta = self._run("read Redis", self._redis.hgetall, self.key(session_id, "meta"))
        if not meta:
            raise ConfigurationError(f"no session {session_id!r}")
        return SessionInfo(session_id, int(meta[b"count"]), float(meta[b"updated"]),
                           meta.get(b"title", b"").decode())

    def list_sessions(self) -> list[SessionInfo]:
        index = f"{self.prefix}sessions"
        keys = self._run("list sessions", self._redis.zrevrange, index, 0, -1)
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, "count", "updated", "title")
        rows = self._run("list sessions", pipe.execute)
        out = []
        for key, (count, updated, title) in zip(keys, rows, strict=True):
            if count is None:
                continue  # deleted meanwhile
            session_id = key.decode().split("{", 1)[1].rsplit("}", 1)[0]
            out.append(SessionInfo(session_id, int(count), float(updated),
                                   (title or b"").decode()))
        return out

    def delete(self, session_id: str) -> bool:
        keys = self._keys(session_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(*keys[:3], self.key(session_id, "checkpoint"), self.key(session_id, "blobs"))
        pipe.zrem(keys[3], keys[1])
        deleted, _ = self._run(f"delete session {session_id!r}", pipe.execute)
        return bool(deleted)

    # -- checkpoints (CheckpointStore) --------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.save_checkpoint_guarded(checkpoint, None)

    def save_checkpoint_guarded(self, checkpoint: Checkpoint,
                                guard: tuple[str, str] | None) -> None:
        """Replace the session's checkpoint (one SET: atomic), fenced like ``append_guarded``
        when ``guard`` is given."""
        session_id = checkpoint.session_id
        record = _encode(redacted(checkpoint_to_record(checkpoint), self._redact))
        keys = [self.key(session_id, "checkpoint")] + ([guard[0]] if guard else [])
        self._run(f"save the checkpoint of session {session_id!r}", self._save_checkpoint,
                  keys=keys, args=[record, guard[1] if guard else ""])

    def load_checkpoint(self, session_id: str) -> Checkpoint | None:
        raw = self._run("read Redis", self._redis.get, self.key(session_id, "checkpoint"))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        return checkpoint_from_record(
            value, where=f"the checkpoint of session {session_id!r} in Redis at {self.url}")

    def delete_checkpoint(self, session_id: str) -> bool:
        return bool(self._run("delete a checkpoint", self._redis.delete,
                              self.key(session_id, "checkpoint")))

    # -- the index of waiting requests (parking) --------------------------------------------
    # Two hashes: request id -> session id, and request id -> answer (HSETNX: the first
    # answer wins); a resume claim is one SET NX key.

    def index_requests(self, session_id: str, request_ids: Sequence[str]) -> None:
        if request_ids:
            self._run("index waiting requests", self._redis.hset, f"{self.prefix}requests",
                      mapping=dict.fromkeys(request_ids, session_id))

    def request_session(self, request_id: str) -> str | None:
        raw = self._run("read Redis", self._redis.hget, f"{self.prefix}requests", request_id)
        return None if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)

    def answer_request(self, request_id: str, answer: Mapping[str, Any]) -> bool:
        return bool(self._run("answer a request", self._redis.hsetnx, f"{self.prefix}answers",
                              request_id, _encode(dict(answer))))

    def request_answers(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not request_ids:
            return {}
        raw = self._run("read Redis", self._redis.hmget, f"{self.prefix}answers",
                        list(request_ids))
        return {rid: json.loads(value) for rid, value in zip(request_ids, raw, strict=True)
                if value is not None}

    def waiting_requests(self) -> list[tuple[str, str]]:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(f"{self.prefix}requests")
        pipe.hkeys(f"{self.prefix}answers")
        indexed, answered = self._run("read Redis", pipe.execute)

        def text(value: Any) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        done = {text(a) for a in answered}
        return [(text(r), text(s)) for r, s in indexed.items() if text(r) not in done]

    def claim_resume(self, checkpoint_id: str) -> bool:
        return bool(self._run("claim a parked turn", self._redis.set,
                              f"{self.prefix}resume:{checkpoint_id}", b"1", nx=True,
                              ex=7 * 24 * 3600))

    def close_requests(self, request_ids: Sequence[str]) -> None:
        if request_ids:
            # The answers stay: the record that these were answered.
            self._run("close answered requests", self._redis.hdel, f"{self.prefix}requests",
                      *request_ids)

    def close(self) -> None:
        self._redis.close()

    def __repr__(self) -> str:
        return f"<RedisSessionStore {self.url} prefix={self.prefix!r}>"
