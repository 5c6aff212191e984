"""Session stores that live outside the process: one JSON-lines file per session (the default),
one SQLite database shared by the processes of a machine, or Redis shared by every machine.

The SQLite and Redis stores are imported on first use (Redis needs the ``redis`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    "JSONLSessionStore",
    "LeaseLostError",
    "RedisSessionStore",
    "RedisStoreError",
    "RedisUnavailableError",
    "SQLiteSessionStore",
    "SQLiteStoreError",
    "SessionFileError",
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
