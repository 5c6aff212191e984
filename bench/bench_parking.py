"""Parked turns: how fast an answer resumes one, and what one costs on disk. Prints the figures.

    python bench/bench_parking.py

- answer -> first model request of the resumed turn, the answering process already up (the
  loop built, the store open): ``loop.answer`` is called and the clock stops when the scripted
  provider receives the resumed turn's request. JSONL and SQLite stores, a short turn and one
  that parked after 100 messages.
- the same from a cold process: ``python`` started with the answer to give (imports, the store,
  the loop, the answer, the resume), from just before the process is spawned.
- bytes on disk of a parked turn: its checkpoint (and, for JSONL, the index files) for one
  question, and for a turn parked after 100 messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, ToolContext, tool  # noqa: E402
from steerable.storage import JSONLSessionStore, SQLiteSessionStore  # noqa: E402


@tool(read_only=True)
async def ask(ctx: ToolContext) -> str:
    """Ask the person."""
    return "answer: " + await ctx.ask("Go on?", choices=["yes", "no"])


@tool(read_only=True)
def look(i: int) -> str:
    """Look at something."""
    return f"line {i}: " + "x" * 60


def store_of(kind: str, where: str) -> Any:
    return JSONLSessionStore(where) if kind == "jsonl" else SQLiteSessionStore(f"{where}.db")


def agent(script: list[Any]) -> Agent:
    return Agent(name="bench", provider=ScriptedProvider(script), tools=[ask, look],
                 max_iterations=200)


async def park(kind: str, where: str, sid: str, before: int) -> str:
    """Park a turn that first made ``before`` tool calls (two messages each); its question id."""
    script: list[Any] = [Reply(tool_calls=[("look", {"i": i})]) for i in range(before)]
    script.append(Reply(tool_calls=[("ask", {})]))
    loop = AgentLoop(agent(script), store=store_of(kind, where), park=True)
    result = await loop.run_turn("work, then ask", session_id=sid)
    await loop.aclose()
    assert result.status.value == "waiting", result
    return result.pending[0].request_id


async def warm(kind: str, where: str, before: int, runs: int) -> list[float]:
    out = []
    for i in range(runs):
        rid = await park(kind, where, f"w{before}-{i}", before)
        hit: list[float] = []

        def first(request: Any, hit: list[float] = hit) -> Reply:
            hit.append(time.perf_counter())
            return Reply(text="done")

        loop = AgentLoop(agent([first]), store=store_of(kind, where), park=True)
        t0 = time.perf_counter()
        handle = loop.answer(rid, "yes")
        result = await handle  # type: ignore[misc]
        assert result.status.value == "completed", result
        out.append(hit[0] - t0)
        await loop.aclose()
    return out


CHILD = """
import sys, time, asyncio
sys.path.insert(0, {src!r})
from bench.bench_parking import child
asyncio.run(child({kind!r}, {where!r}, {rid!r}))
"""


async def child(kind: str, where: str, rid: str) -> None:
    def first(request: Any) -> Reply:
        print(json.dumps({"hit": time.time()}), flush=True)
        return Reply(text="done")

    loop = AgentLoop(agent([first]), store=store_of(kind, where), park=True)
    result = await loop.answer(rid, "yes")  # type: ignore[misc]
    assert result.status.value == "completed", result
    await loop.aclose()


async def cold(kind: str, where: str, runs: int) -> list[float]:
    out = []
    for i in range(runs):
        rid = await park(kind, where, f"c-{i}", 0)
        code = CHILD.format(src=str(ROOT / "src"), kind=kind, where=where, rid=rid)
        t0 = time.time()
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        hit = json.loads(done.stdout.splitlines()[-1])["hit"]
        out.append(hit - t0)
    return out


def jsonl_bytes(where: str, sid: str) -> tuple[int, int]:
    """The parked turn's checkpoint file, and its entries in the index of waiting requests."""
    store = JSONLSessionStore(where)
    index = sum(p.stat().st_size for p in (Path(where) / ".requests").glob("*.open"))
    return store.checkpoint_path(sid).stat().st_size, index


def sqlite_bytes(where: str, sid: str) -> int:
    db = sqlite3.connect(f"{where}.db")
    try:
        (record,) = db.execute("SELECT record FROM checkpoints WHERE session_id=?",
                               (sid,)).fetchone()
        rows = db.execute("SELECT request_id, session_id FROM requests WHERE session_id=?",
                          (sid,)).fetchall()
    finally:
        db.close()
    return len(record.encode()) + sum(len(r) + len(s) for r, s in rows)


def show(what: str, times: list[float]) -> None:
    times = sorted(times)
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    print(f"{what}: median {statistics.median(times) * 1e3:7.2f} ms, p95 {p95 * 1e3:7.2f} ms "
          f"({len(times)} runs)")


async def main() -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("jsonl", "sqlite"):
            where = str(Path(tmp) / kind)
            for before in (0, 50):
                show(f"{kind:>6}, answer -> resumed model request, process up, "
                     f"{2 * before + 1:>3} messages", await warm(kind, where, before, 30))
            show(f"{kind:>6}, answer -> resumed model request, cold process       ",
                 await cold(kind, where, 5))
        for before in (0, 50):
            where = str(Path(tmp) / f"disk{before}")
            await park("jsonl", where, "s", before)
            cp, index = jsonl_bytes(where, "s")
            await park("sqlite", where, "s", before)
            print(f"on disk, a turn parked after {2 * before + 1:>3} messages: JSONL checkpoint "
                  f"{cp} B + index {index} B; SQLite row {sqlite_bytes(where, 's')} B")


if __name__ == "__main__":
    asyncio.run(main())
