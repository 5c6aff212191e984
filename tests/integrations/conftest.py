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

from tests._components import free_port

SERVER = Path(__file__).with_name("mcp_server.py")


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    monkeypatch.setenv("MCP_TEST_MARKS", str(folder))
    return folder


@pytest.fixture
def http_server(marks: Path) -> Iterator[str]:
    """The test server on a loopback port, as its own process; yields the /mcp URL."""
    port = free_port()
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


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for CLI subprocesses: isolated config and data dirs, no provider keys."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith(("OPENAI_", "STEERABLE_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    env["STEERABLE_DATA_DIR"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["HOME"] = str(tmp_path / "home")
    env["NO_COLOR"] = "1"
    return env


def run_cli(env: dict[str, str], *args: str, cwd: Path | None = None,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)
