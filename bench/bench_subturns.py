"""Sub-turn benchmarks: the issue's two scenarios, each printing its figures.

    python bench/bench_subturns.py              # all
    python bench/bench_subturns.py spawn_cost   # one

Targets (2 cores): a sync sub-turn whose model answers at once costs <= 150 us more than a
plain tool call; 1,000 async children in one turn (limits raised) take <= 1 s wall and leave no
leak (tasks and RSS back to baseline after the turn).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from steerable import Agent, AgentLoop, Limits, Reply, ScriptedProvider, ToolContext, tool


@tool(read_only=True)
async def plain(task: str) -> str:
    """Answer at once."""
    return "child answer"


def _child() -> Agent:
    return Agent(name="helper", description="answers at once",
                 provider=ScriptedProvider([lambda request: Reply(text="child answer")] * 100_000))


async def _per_call(n: int, delegate: bool) -> float:
    """Seconds per iteration of a turn whose every iteration makes one call: a plain tool, or
    a sync sub-turn (``subagent``) whose model answers at once."""
    name, args = ("subagent", {"agent": "helper", "task": "t"}) if delegate else ("plain", {"task": "t"})
    script = [Reply(tool_calls=[(name, args)])] * (n - 1) + [Reply(text="done")]
    agent = Agent(name="main", provider=ScriptedProvider(script), tools=[plain],
                  subagents=[_child()], max_iterations=n + 1)
    loop = AgentLoop(agent)
    t0 = time.perf_counter()
    result = await loop.run_turn("go", session_id="s")
    elapsed = time.perf_counter() - t0
    assert result.iterations == n and result.status.value == "completed", result
    await loop.aclose()
    return elapsed / (n - 1)


async def spawn_cost() -> None:
    n = 200
    await _per_call(20, True)  # warm up imports and caches
    plain_runs, sub_runs = [], []
    for _ in range(7):  # alternate, so load changes hit both alike
        plain_runs.append(await _per_call(n, False))
        sub_runs.append(await _per_call(n, True))
    p, s = statistics.median(plain_runs), statistics.median(sub_runs)
    print(f"plain tool call per iteration:   {p * 1e6:7.1f} us (median of 7 x {n})")
    print(f"sync sub-turn per iteration:     {s * 1e6:7.1f} us")
    print(f"sub-turn over a plain tool call: {(s - p) * 1e6:7.1f} us (target <= 150 us)")


async def thousand_children() -> None:
    n = 1000
    proc = psutil.Process()

    @tool
    async def fan_out(ctx: ToolContext) -> str:
        """Start n children and wait for all of them."""
        handles = [ctx.spawn_subturn(_shared, f"part {i}", deliver=True) for i in range(n)]
        results = [await h for h in handles]
        return f"{sum(r.status.value == 'completed' for r in results)} completed"

    _shared = _child()
    limits = Limits(subturns_per_turn=n, active_turns=None)

    async def one_turn() -> tuple[float, int]:
        agent = Agent(name="main", tools=[fan_out], provider=ScriptedProvider(
            [Reply(tool_calls=[("fan_out", {})]), Reply(text="done")]))
        loop = AgentLoop(agent, limits=limits)
        t0 = time.perf_counter()
        result = await loop.run_turn("go", session_id="s")
        wall = time.perf_counter() - t0
        await loop.wait_idle()
        delivered = len(result.messages)
        await loop.aclose()
        return wall, delivered

    await one_turn()  # warm up
    gc.collect()
    tasks0, rss0 = len(asyncio.all_tasks()), proc.memory_info().rss
    walls = []
    for _ in range(5):
        wall, messages = await one_turn()
        walls.append(wall)
    gc.collect()
    tasks1, rss1 = len(asyncio.all_tasks()), proc.memory_info().rss
    print(f"1,000 async children in one turn: {statistics.median(walls):.3f} s wall "
          f"(median of 5; best {min(walls):.3f} s; target <= 1 s); the turn kept "
          f"{messages} messages (the 1,000 results delivered before its last call)")
    print(f"after 5 such turns: tasks {tasks0} -> {tasks1}, RSS {rss0 / 2**20:.1f} -> "
          f"{rss1 / 2**20:.1f} MB ({(rss1 - rss0) / 2**20:+.1f} MB)")


SCENARIOS = {"spawn_cost": spawn_cost, "thousand_children": thousand_children}


async def main(names: list[str]) -> None:
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    for name in names or list(SCENARIOS):
        await SCENARIOS[name]()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
