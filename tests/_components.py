"""What tests need from the machine: a free loopback port, and one rule for a missing component.

Outside CI a test that needs a component the machine lacks (redis-server, Chromium, bubblewrap,
ripgrep, a Temporal binary, the docs extra) skips with the reason; CI sets
``STEERABLE_REQUIRE_<NAME>=1`` (see ``.ci/run``), and there the same absence fails the test.
"""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing(name: str, reason: str) -> NoReturn:
    """``name`` (REDIS, BROWSER, BWRAP, RG, TEMPORAL, DOCS) is missing: skip, or fail where
    ``STEERABLE_REQUIRE_<name>=1`` requires it."""
    env = f"STEERABLE_REQUIRE_{name}"
    if os.environ.get(env) == "1":
        pytest.fail(f"{env}=1 but {reason}")
    pytest.skip(reason)
