"""Fixtures for the integration tests: the MCP test server, over stdio and over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("mcp_server.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    monkeypatch.setenv("MCP_TEST_MARKS", str(folder))
    return folder


@pytest.fixture
def http_server(marks: Path) -> Iterator[str]:
    """The test server on a loopback port, as its own process; yields the /mcp URL."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)],
                            env={**os.environ, "MCP_TEST_MARKS": str(marks)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the MCP test server did not start") from None
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()
