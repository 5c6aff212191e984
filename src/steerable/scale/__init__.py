"""Several worker processes sharing sessions through Redis (the ``redis`` extra).

``RedisWorker`` runs turns of any session it takes (one worker per session at a time, under a
lease); ``RedisClient`` posts messages and control commands from any process and follows a
session's events. See docs/guides/redis-workers.md.
"""

from steerable.scale._client import (
    MessageAck,
    RedisClient,
    SendResult,
    StreamedEvent,
    WorkerUnavailableError,
)
from steerable.scale._lease import LeaseTiming
from steerable.scale._worker import RedisWorker, WorkerStatistics

__all__ = [
    "LeaseTiming",
    "MessageAck",
    "RedisClient",
    "RedisWorker",
    "SendResult",
    "StreamedEvent",
    "WorkerStatistics",
    "WorkerUnavailableError",
]
