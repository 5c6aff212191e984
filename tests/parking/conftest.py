"""Stores for the parking tests: every backend that keeps checkpoints (Redis: a real server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._redis import RedisServer
from tests.coding.conftest import cli_env  # noqa: F401  (the CLI tests' fixture)
from tests.server.test_browser import browser  # noqa: F401  (the browser tests' fixture)


@pytest.fixture(scope="session")
def _parking_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["memory", "jsonl", "sqlite", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """A factory of stores over the same data: each call is what another process would open
    (the memory store, which no other process can see, hands out the same object)."""
    kind = request.param
    opened: list[Any] = []
    if kind == "memory":
        from steerable import InMemorySessionStore

        shared = InMemorySessionStore()

        def make() -> Any:
            return shared
    elif kind == "jsonl":
        from steerable.storage import JSONLSessionStore

        def make() -> Any:
            return JSONLSessionStore(tmp_path / "sessions")
    elif kind == "sqlite":
        from steerable.storage import SQLiteSessionStore

        def make() -> Any:
            store = SQLiteSessionStore(tmp_path / "s.db")
            opened.append(store)
            return store
    else:
        server: RedisServer = request.getfixturevalue("_parking_redis")
        server.flush()
        from steerable.storage import RedisSessionStore

        def make() -> Any:
            store = RedisSessionStore(server.url)
            opened.append(store)
            return store
    yield make
    for store in opened:
        store.close()
