"""Session stores that live outside the process: one JSON-lines file per session (the default),
one SQLite database shared by the processes of a machine, or Redis shared by every machine.
The SQLite and Redis stores are imported on first use (Redis needs the ``redis`` extra).

Durable turns: a backend that keeps checkpoints implements ``CheckpointStore``
(``save_checkpoint``, ``load_checkpoint``, ``delete_checkpoint``, ``checkpoint_blocking``) next
to ``SessionStore``, and
stores each ``Checkpoint`` as the JSON object ``checkpoint_to_record`` gives
(``checkpoint_from_record`` reads it back, checking the schema version).
``tests/storage/checkpoint_contract.py`` is the behaviour every backend must pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from steerable._core._checkpoint import Checkpoint, CheckpointStore
from steerable.errors import CheckpointError
from steerable.storage._checkpoint_records import (
    CHECKPOINT_VERSION,
    checkpoint_from_record,
    checkpoint_to_record,
)
from steerable.storage._records import MissingBlobError
from steerable.storage.jsonl import JSONLSessionStore, SessionFileError, default_data_dir

if TYPE_CHECKING:
    from steerable.storage.redis_store import (
        LeaseLostError,
        RedisSessionStore,
        RedisStoreError,
        RedisUnavailableError,
    )
    from steerable.storage.sqlite import SQLiteSessionStore, SQLiteStoreError

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "JSONLSessionStore",
    "LeaseLostError",
    "MissingBlobError",
    "RedisSessionStore",
    "RedisStoreError",
    "RedisUnavailableError",
    "SQLiteSessionStore",
    "SQLiteStoreError",
    "SessionFileError",
    "checkpoint_from_record",
    "checkpoint_to_record",
    "default_data_dir",
]

_LAZY = {
    "LeaseLostError": "steerable.storage.redis_store",
    "RedisSessionStore": "steerable.storage.redis_store",
    "RedisStoreError": "steerable.storage.redis_store",
    "RedisUnavailableError": "steerable.storage.redis_store",
    "SQLiteSessionStore": "steerable.storage.sqlite",
    "SQLiteStoreError": "steerable.storage.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'steerable.storage' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
