"""Server benchmarks: ``steerable serve`` in its own process, clients in this one.

    python bench/bench_server.py              # all
    python bench/bench_server.py latency      # one of: latency, fanout, sessions

Targets (2 cores, loopback): event emitted -> SSE client received p50 <= 2 ms, p99 <= 10 ms;
1,000 SSE clients on one session lose nothing and grow the server's RSS by <= 50 MB;
200 concurrent sessions each running a one-call turn through HTTP: wall time and RSS.
The server runs the scripted provider (instant answers), so the figures are the server's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def server(steps: list[dict[str, object]]) -> AsyncIterator[tuple[str, psutil.Process]]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(steps))
        env = {**os.environ, "STEERABLE_DATA_DIR": str(Path(tmp) / "data"),
               "PYTHONPATH": str(ROOT / "src")}
        env.pop("STEERABLE_SERVER_TOKEN", None)
        proc = subprocess.Popen([sys.executable, "-m", "steerable", "serve", "--port", "0",
                                 "--yes", "--provider", "scripted", "--script", str(script),
                                 "--workspace", tmp], env=env, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        try:
            yield url, psutil.Process(proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)


async def follow(client: httpx.AsyncClient, sid: str, turns: int, ready: asyncio.Event | None,
                 sink: list[tuple[str, float]] | None) -> list[int]:
    """Read a session's events until ``turns`` top-level TURN_ENDs; their seqs."""
    seqs: list[int] = []
    ends = 0
    async with client.stream("GET", f"/v1/sessions/{sid}/events",
                             headers={"Last-Event-ID": "0"}) as response:
        if ready is not None:
            ready.set()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            now = time.time()
            event = json.loads(line[5:])
            seqs.append(event["seq"])
            if sink is not None:
                sink.append((event["kind"], now - event["time"]))
            if event["kind"] == "turn_end" and event["parent_turn_id"] is None:
                ends += 1
                if ends == turns:
                    return seqs
    return seqs


async def latency(turns: int = 300) -> None:
    async with server([{"text": "a short answer of a few words"}] * turns) as (url, _), \
            httpx.AsyncClient(base_url=url, timeout=30) as client:
        samples: list[tuple[str, float]] = []
        ready = asyncio.Event()
        reader = asyncio.create_task(follow(client, "lat", turns, ready, samples))
        await ready.wait()
        for done in range(1, turns + 1):  # one turn at a time: no queueing behind turns
            r = await client.post("/v1/sessions/lat/messages", json={"text": "go"})
            assert r.status_code == 202
            while sum(1 for kind, _ in samples if kind == "turn_end") < done:
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.005)
        await reader
        ms = sorted(d * 1000 for _, d in samples)
        q = statistics.quantiles(ms, n=100)
        print(f"sse latency: {len(ms)} events over {turns} turns: p50 {q[49]:.2f} ms, "
              f"p99 {q[98]:.2f} ms, max {ms[-1]:.2f} ms (targets 2 / 10 ms)")


async def fanout(clients: int = 1000, turns: int = 3) -> None:
    text = " ".join(f"word{i}" for i in range(60))
    async with server([{"text": text}] * turns) as (url, proc):
        limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
            await client.get("/healthz")
            rss0 = proc.memory_info().rss
            readies = [asyncio.Event() for _ in range(clients)]
            readers = [asyncio.create_task(follow(client, "fan", turns, readies[i], None))
                       for i in range(clients)]
            t0 = time.perf_counter()
            await asyncio.gather(*(r.wait() for r in readies))
            connected = time.perf_counter() - t0
            rss_connected = proc.memory_info().rss
            t1 = time.perf_counter()
            for _ in range(turns):
                await client.post("/v1/sessions/fan/messages",
                                  json={"text": "go", "policy": "follow_up"})
            results = await asyncio.gather(*readers)
            wall = time.perf_counter() - t1
            rss_peak = max(proc.memory_info().rss, rss_connected)
            expected = results[0]
            complete = sum(1 for r in results if r == expected and
                           r == list(range(r[0], r[-1] + 1)))
        print(f"sse fan-out: {clients} clients connected in {connected:.2f} s; {turns} turns "
              f"({len(expected)} events each) reached all in {wall:.2f} s; {complete}/{clients} "
              f"clients got every event in order; server RSS +{(rss_peak - rss0) / 2**20:.1f} MB "
              f"(target <= 50 MB)")


async def sessions(count: int = 200) -> None:
    async with server([{"text": "done"}] * count) as (url, proc):
        limits = httpx.Limits(max_connections=count + 10)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
            await client.get("/healthz")
            rss0 = proc.memory_info().rss
            t0 = time.perf_counter()
            readies = [asyncio.Event() for _ in range(count)]
            readers = [asyncio.create_task(follow(client, f"s{i}", 1, readies[i], None))
                       for i in range(count)]
            await asyncio.gather(*(r.wait() for r in readies))
            posts = await asyncio.gather(*(client.post(f"/v1/sessions/s{i}/messages",
                                                       json={"text": "one call"})
                                           for i in range(count)))
            assert all(p.status_code == 202 for p in posts)
            await asyncio.gather(*readers)
            wall = time.perf_counter() - t0
            rss = proc.memory_info().rss
            listed = (await client.get("/v1/sessions")).json()["sessions"]
        print(f"{count} concurrent sessions, one-call turns through HTTP: {wall:.2f} s wall "
              f"({count / wall:.0f} turns/s, SSE follow included); {len(listed)} sessions "
              f"saved; server RSS {rss / 2**20:.1f} MB (+{(rss - rss0) / 2**20:.1f} MB)")


async def main(which: list[str]) -> None:
    print(f"load average before: {Path('/proc/loadavg').read_text().split()[:3]}")
    for name, fn in (("latency", latency), ("fanout", fanout), ("sessions", sessions)):
        if not which or name in which:
            await fn()
    print(f"load average after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
