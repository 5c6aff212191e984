"""A private, real ``redis-server`` for tests: a free loopback port, persistence off.

No mock stands in for Redis. Outside CI a missing ``redis-server`` skips the tests that need it,
with the reason; with ``STEERABLE_REQUIRE_REDIS=1`` (set by ``.ci/run``) it fails them instead.
The server is stopped by its PID, never by name.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests._components import free_port, missing


def redis_binary() -> str:
    """The path of redis-server, or skip (fail in CI) with the reason."""
    found = shutil.which("redis-server")
    if found is None:
        missing("REDIS", "redis-server is not installed (apt-get install redis-server)")
    return found


class RedisServer:
    """One redis-server process on 127.0.0.1:``port``; ``stop`` and ``start`` again keep the
    port, which is how tests restart Redis under running workers."""

    def __init__(self, workdir: Path) -> None:
        self.binary = redis_binary()
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
             "--protected-mode", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"redis-server exited at start: {err.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port} within 10 s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.kill()  # by PID: only the server this object started
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            sock.recv(16)
