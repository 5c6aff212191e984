"""Durable turns: what checkpoints cost. Prints the figures.

    python bench/bench_durable.py

Targets: per-iteration overhead with checkpoints on <= 2x the same without (instant model and
tool), and one checkpoint write <= 1 ms for a 200-message turn.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from steerable import (
    Agent,
    AgentLoop,
    InMemorySessionStore,
    Message,
    Reply,
    ScriptedProvider,
    ToolCall,
    tool,
)
from steerable.storage import Checkpoint, JSONLSessionStore


@tool
async def noop(i: int) -> str:
    """Do nothing."""
    return "ok"


async def _per_iteration(store: Any, checkpoints: bool, n: int, sid: str) -> float:
    script = [Reply(tool_calls=[("noop", {"i": i})]) for i in range(n - 1)] + [Reply(text="done")]
    loop = AgentLoop(Agent(provider=ScriptedProvider(script), tools=[noop], max_iterations=n + 1),
                     store=store, checkpoints=checkpoints)
    t0 = time.perf_counter()
    result = await loop.run_turn("go", session_id=sid)
    elapsed = time.perf_counter() - t0
    assert result.iterations == n, result
    await loop.aclose()
    return elapsed / n


async def overhead() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"memory": InMemorySessionStore, "jsonl": lambda: JSONLSessionStore(tmp)}
        for name, make in stores.items():
            for n in (25, 200):
                runs: dict[bool, list[float]] = {False: [], True: []}
                for i in range(9):  # interleaved, so that load changes hit both alike
                    for on in (False, True):
                        runs[on].append(await _per_iteration(make(), on, n, f"{name}-{n}-{on}-{i}"))
                figures = {on: statistics.median(r) for on, r in runs.items()}
                print(f"{name:>6} store, {n:>3} iterations: {figures[False] * 1e6:6.0f} us/iteration "
                      f"without checkpoints, {figures[True] * 1e6:6.0f} us with "
                      f"({figures[True] / figures[False]:.2f}x; median of 9 interleaved, one instant tool each)")


def _big_checkpoint(messages: int, seq: int = 1) -> Checkpoint:
    out: list[Message] = [Message("user", "Refactor the parser and run the tests. " * 3)]
    i = 0
    while len(out) < messages:
        call = ToolCall(f"c{i}", "read", {"path": f"src/module_{i}.py"})
        out.append(Message("assistant", "Let me look at the next file.", tool_calls=(call,)))
        out.append(Message("tool", f"     1\timport os\n     2\tdef f{i}(x):\n" * 6,
                           tool_call_id=call.id, name="read"))
        i += 1
    return Checkpoint(session_id="big", turn_id="t", origin_turn_id="t", agent="a",
                      tools=("read",), input=out[0].content, stage="model", iteration=i,
                      messages=tuple(out[:messages]), seq=seq)


def write_time() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = JSONLSessionStore(tmp)
        full, step = [], []
        for r in range(100):
            store.delete_checkpoint("big")
            cp = _big_checkpoint(200)
            t0 = time.perf_counter()
            store.save_checkpoint(cp)  # a new turn's first write (whole file), in a new process
            full.append(time.perf_counter() - t0)
            grown = Checkpoint(**{**{f: getattr(cp, f) for f in cp.__dataclass_fields__},
                                  "messages": (*cp.messages, Message("user", f"steer {r}")),
                                  "seq": 2})
            t0 = time.perf_counter()
            store.save_checkpoint(grown)  # every later write of the turn: appends what is new
            step.append(time.perf_counter() - t0)
        size = store.checkpoint_path("big").stat().st_size
        t0 = time.perf_counter()
        for _ in range(100):
            loaded = store.load_checkpoint("big")
        load = (time.perf_counter() - t0) / 100
        assert loaded is not None and len(loaded.messages) == 201
    print(f"checkpoint write, 200-message turn: {statistics.median(step) * 1e6:.0f} us per safe "
          f"point (appends the new message and the state; median of 100)")
    print(f"  first write of a 200-message turn (whole file, e.g. after a resume): "
          f"{statistics.median(full) * 1e6:.0f} us; file {size / 1024:.0f} KiB; load {load * 1e3:.2f} ms")


async def main() -> None:
    await overhead()
    write_time()


if __name__ == "__main__":
    asyncio.run(main())
