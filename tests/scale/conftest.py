"""Fixtures for the tests that need a real Redis (see ``tests/_redis.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._redis import RedisServer


@pytest.fixture(scope="session")
def _shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(_shared_redis: RedisServer) -> str:
    """A real Redis with nothing in it (one server for the session, flushed per test)."""
    _shared_redis.flush()
    return _shared_redis.url


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own, which it may stop and start again."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()
