"""Worker processes for the scale tests: start them, find them by worker id, kill them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from steerable.scale import RedisClient

ROOT = Path(__file__).resolve().parents[2]


class Workers:
    def __init__(self, url: str, tmp: Path, *, ttl: float = 1.0, sqlite: Path | None = None,
                 renew: float | None = None) -> None:
        self.env = dict(os.environ)
        if renew is not None:
            self.env["TEST_LEASE_RENEW"] = str(renew)
        self.url = url
        self.ledger = tmp / "ledger.txt"
        self.ledger.touch()
        self.ttl = ttl
        self.sqlite = sqlite
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def start(self, *names: str) -> None:
        for name in names:
            args = [sys.executable, "-m", "tests.scale._worker_proc", self.url, name,
                    str(self.ledger), str(self.ttl)]
            if self.sqlite is not None:
                args.append(str(self.sqlite))
            self.procs[name] = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                                                text=True, env=self.env)
        for name in names:
            out = self.procs[name].stdout
            assert out is not None
            line = out.readline()
            assert line.startswith("ready"), f"worker {name} did not start: {line!r}"

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def ledger_lines(self) -> list[list[str]]:
        return [line.split() for line in self.ledger.read_text().splitlines()]

    @staticmethod
    def name_of(worker_id: str | None) -> str:
        assert worker_id is not None
        return worker_id.removesuffix("-w")


async def events_until(client: RedisClient, session_id: str, stop: Any, *,
                       timeout: float = 20.0, last_id: str | None = None) -> list[dict[str, Any]]:
    """Read the session's events until ``stop(event)`` is true; returns them all."""
    seen: list[dict[str, Any]] = []

    async def read() -> list[dict[str, Any]]:
        async for item in client.events(session_id, last_id, block=0.2):
            seen.append(item.data)
            if stop(item.data):
                return seen
        return seen

    return await asyncio.wait_for(read(), timeout)


def ended(count: int = 1) -> Any:
    """A stop condition: ``count`` top-level TURN_END events seen."""
    state = {"n": 0}

    def check(event: dict[str, Any]) -> bool:
        if event["kind"] == "turn_end" and event["parent_turn_id"] is None:
            state["n"] += 1
        return state["n"] >= count

    return check


def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
