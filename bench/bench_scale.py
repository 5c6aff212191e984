"""Redis workers: throughput of one-call turns over 1, 2 and 4 worker processes, control
latency across processes, and failover time after kill -9. Prints the figures.

Needs redis-server (started privately on a free loopback port, persistence off) and the
``redis`` extra. The worker processes are the scale tests' worker (``tests/scale/_worker_proc``:
a RedisWorker with an instant scripted model). Usage::

    python bench/bench_scale.py [--turns 2000] [--workers 1,2,4] [--skip-failover]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from steerable.scale import RedisClient  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Redis:
    def __init__(self, workdir: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", workdir],
                                     stdout=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise SystemExit("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            sock.recv(16)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start_workers(url: str, names: list[str], ledger: Path, ttl: float) -> dict[str, Any]:
    procs = {name: subprocess.Popen(
        [sys.executable, "-m", "tests.scale._worker_proc", url, name, str(ledger), str(ttl)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True) for name in names}
    for proc in procs.values():
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    return procs


def stop_workers(procs: dict[str, Any]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for name, proc in procs.items():
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            print(f"worker {name} did not stop within 20 s of SIGTERM; killed")
            proc.kill()
            proc.wait()
        proc.stdout.close()


async def throughput(url: str, workers: int, turns: int, tmp: Path) -> float:
    procs = start_workers(url, [f"t{i}" for i in range(workers)], tmp / "ledger", 5.0)
    client = RedisClient(url)
    sessions = [f"bench{i}" for i in range(max(1, turns // 10))]
    per = turns // len(sessions)
    try:
        start = time.perf_counter()

        async def post(session: str) -> None:
            for i in range(per):
                await client.send(f"m{i}", session, policy="follow_up")

        await asyncio.gather(*(post(s) for s in sessions))
        keys = [f"steerable:s:{{{s}}}:meta" for s in sessions]
        while True:
            pipe = client._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hget(key, "count")
            counts = await pipe.execute()
            done = sum(int(c) // 2 for c in counts if c is not None)
            if done == len(sessions) * per:
                break
            if time.perf_counter() - start > 300:
                raise SystemExit(f"stalled: {done} of {len(sessions) * per} turns done")
            await asyncio.sleep(0.02)
        elapsed = time.perf_counter() - start
        info = await client._redis.info("memory")
        stream = await client._redis.memory_usage(f"steerable:s:{{{sessions[0]}}}:events")
        history = await client._redis.memory_usage(f"steerable:s:{{{sessions[0]}}}:msgs")
        print(f"memory      {info['used_memory'] / len(sessions) / 1024:.1f} KiB of Redis per "
              f"session ({per} turns each; its events stream {stream / 1024:.1f} KiB, its "
              f"history {history / 1024:.1f} KiB)")
    finally:
        await client.aclose()
        stop_workers(procs)
    return len(sessions) * per / elapsed


async def control_latency(url: str, tmp: Path, rounds: int = 60) -> tuple[list[float], list[float]]:
    """Round trip of a steer posted from another process (accepted by the holder), and the time
    until STEERING_INJECTED on the holder's turn (at the turn's next checkpoint: the end of a
    50 ms tool call)."""
    procs = start_workers(url, ["a", "b"], tmp / "ledger", 5.0)
    client = RedisClient(url)
    accept: list[float] = []
    injected: list[float] = []
    try:
        for i in range(rounds):
            session = f"lat{i}"
            await client.send("tool:0.05:x", session)
            events = client.events(session, block=0.2)
            async for item in events:
                if item.data["kind"] == "tool_exec_start":
                    break
            posted = time.time()
            t0 = time.perf_counter()
            assert await client.steer("steer", session)
            accept.append(time.perf_counter() - t0)
            async for item in events:
                if item.data["kind"] == "steering_injected":
                    injected.append(float(item.data["time"]) - posted)
                if item.data["kind"] == "turn_end":
                    break
            await events.aclose()
    finally:
        await client.aclose()
        stop_workers(procs)
    return accept, injected


async def failover(url: str, tmp: Path, ttl: float, rounds: int) -> list[float]:
    """kill -9 of the worker running a turn (mid-tool) until its turn starts again elsewhere."""
    out = []
    for r in range(rounds):
        procs = start_workers(url, ["a", "b"], tmp / "ledger", ttl)
        client = RedisClient(url)
        session = f"fail{ttl}-{r}"
        try:
            await client.send("tool:30:f", session)
            events = client.events(session, block=0.1)
            async for item in events:
                if item.data["kind"] == "tool_exec_start":
                    break
            holder = (await client.holder(session) or "").removesuffix("-w")
            os.kill(procs[holder].pid, signal.SIGKILL)
            killed = time.time()
            async for item in events:
                if item.data["kind"] == "turn_start":
                    out.append(float(item.data["time"]) - killed)
                    break
            await events.aclose()
        finally:
            await client.aclose()
            stop_workers(procs)
    return out


def load() -> str:
    return Path("/proc/loadavg").read_text().strip()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--only-failover", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        redis = Redis(tmp)
        try:
            rates = {}
            for n in [] if args.only_failover else [int(x) for x in args.workers.split(",")]:
                redis.flush()
                rates[n] = await throughput(redis.url, n, args.turns, Path(tmp))
                print(f"throughput  {n} worker(s): {rates[n]:7.1f} turns/s "
                      f"({args.turns} one-call turns)   load {load().split()[0]}")
            if rates:
                base = rates[min(rates)]
                print("scaling    ", "  ".join(f"{n}w: {r / base:.2f}x" for n, r in rates.items()))
                redis.flush()
                accept, injected = await control_latency(redis.url, Path(tmp))
                print(f"control     steer accepted by the holder: p50 {pct(accept, .5)*1000:.1f}"
                      f" ms, p99 {pct(accept, .99)*1000:.1f} ms")
                print(f"            steer -> STEERING_INJECTED:   p50 {pct(injected, .5)*1000:.1f}"
                      f" ms, p99 {pct(injected, .99)*1000:.1f} ms (next checkpoint: end of a "
                      "50 ms tool)")
            if not args.skip_failover:
                for ttl, rounds in ((1.0, 3), (5.0, 2)):
                    redis.flush()
                    times = await failover(redis.url, Path(tmp), ttl, rounds)
                    print(f"failover    lease {ttl:g} s: kill -9 -> turn restarted elsewhere "
                          f"{', '.join(f'{t:.2f}' for t in times)} s (goal <= {2 * ttl:g} s)")
        finally:
            redis.stop()
    print(f"load average: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
