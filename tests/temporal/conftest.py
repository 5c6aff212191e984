"""Fixtures of the Temporal tests: one dev server and one Redis per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._redis import RedisServer
from tests.temporal._devserver import DevServer, require_sdk
from tests.temporal._drivers import Make, maker


@pytest.fixture(scope="session")
def temporal_target() -> Iterator[str]:
    require_sdk()
    server = DevServer()
    server.start()
    yield server.target
    server.stop()


@pytest.fixture(scope="session")
def _temporal_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis-temporal"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def events_url(_temporal_redis: RedisServer) -> str:
    _temporal_redis.flush()
    return _temporal_redis.url


@pytest.fixture
def task_queue(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A task queue of the test's own: its workers serve only its sessions."""
    return f"t-{tmp_path.name}"


@pytest.fixture(params=["local", "temporal"])
def make(request: pytest.FixtureRequest, task_queue: str, events_url: str) -> Make:
    """The behavioural tests' engine: each runs on the local engine and on Temporal."""
    target = request.getfixturevalue("temporal_target") if request.param == "temporal" else None
    return maker(request.param, target, task_queue, events_url)
