"""Memory a live turn holds: bytes per idle turn (tracemalloc), and the objects the garbage
collector tracks per idle turn (a full collection walks them all: with 10,000 live turns they
are what the collector's time grows with), 1,000 turns waiting on the model.

    python bench/bench_turn_memory.py
    STEERABLE_SRC=/other/tree/src python bench/bench_turn_memory.py   # compare trees

Every turn is started and left waiting inside its model call, so what is counted is the state
a running turn keeps (its ``TurnState`` and parts, task, receipt, first checkpoint's views),
not the cost of finishing it. The figure is the traced growth divided by the number of turns.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, os.environ.get("STEERABLE_SRC") or str(Path(__file__).resolve().parent.parent / "src"))

from steerable import Agent, AgentLoop, Reply, ScriptedProvider

TURNS = 1000


async def idle_turn_bytes(n: int = TURNS) -> tuple[float, float, float]:
    release = asyncio.Event()
    waiting = 0

    async def waiting_reply(_request: object) -> Reply:
        nonlocal waiting
        waiting += 1
        await release.wait()
        return Reply(text="ok")

    loop = AgentLoop(Agent(provider=ScriptedProvider([waiting_reply] * (n + 10))))
    # Warm up: first-use caches (hook tables, event classes) are not per-turn state.
    warm = [loop.start_turn("go", session_id=f"w{i}") for i in range(10)]
    await asyncio.sleep(0.05)
    gc.collect()
    tracked = len(gc.get_objects())
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    handles = [loop.start_turn("go", session_id=f"s{i}") for i in range(n)]
    while waiting < n + len(warm):
        await asyncio.sleep(0.01)
    gc.collect()
    live, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracked = len(gc.get_objects()) - tracked
    states = list(loop._engine.turns.values())
    state_bytes = sum(_state_size(st) for st in states) / len(states)
    release.set()
    for h in [*warm, *handles]:
        await h
    await loop.aclose()
    return (live - before) / n, state_bytes, tracked / n


_OWN = ("steerable._core._turn_state", "steerable._core._cancel")


def _state_size(obj: object) -> int:
    """Shallow size of a turn's state object, its parts and the containers they made."""
    size = sys.getsizeof(obj)
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            value = getattr(obj, name, None)
            if type(value).__module__ in _OWN and not isinstance(value, int):
                size += _state_size(value)
            elif isinstance(value, (list, dict, set)) and not value:
                size += sys.getsizeof(value)
    return size


def main() -> None:
    per_turn, state, tracked = asyncio.run(idle_turn_bytes())
    print(f"{TURNS} idle turns (waiting in their model call): {per_turn:,.0f} bytes per turn "
          f"(tracemalloc); the turn's state object, its parts and their empty containers: "
          f"{state:,.0f} bytes (sys.getsizeof); {tracked:.1f} objects the collector tracks "
          "per turn")


if __name__ == "__main__":
    main()
