"""JSONL store: the cost of appending one turn to a session of 1 vs 10,000 messages, and the
time to load a 10,000-message session. Prints the figures."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from steerable import Message, ToolCall, TurnRecord
from steerable.storage import JSONLSessionStore


def turn(i: int) -> list[Message]:
    return [Message("user", f"question {i} " + "words " * 20),
            Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "read", {"path": "a.py"}),)),
            Message("tool", "     1\tprint('hello')\n" * 10, tool_call_id=f"c{i}", name="read"),
            Message("assistant", f"answer {i} " + "text " * 40)]


def append_cost(store: JSONLSessionStore, sid: str, rounds: int = 50) -> float:
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        store.append(sid, turn(i), TurnRecord(f"t{i}", "completed", 2))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        store = JSONLSessionStore(d)
        store.append("small", [Message("user", "hi")], TurnRecord("t", "completed", 1))
        big = [m for i in range(2500) for m in turn(i)]
        store.append("big", big, TurnRecord("seed", "completed", 1))
        small_ms = append_cost(store, "small")
        big_ms = append_cost(store, "big")
        loads = []
        for _ in range(7):
            t0 = time.perf_counter()
            n = len(store.load("big"))
            loads.append(time.perf_counter() - t0)
        print(f"append one turn (4 messages, fsync), session of 1 message:      {small_ms:.2f} ms (median of 50)")
        print(f"append one turn (4 messages, fsync), session of 10,000 messages: {big_ms:.2f} ms (median of 50)")
        print(f"load a session of {n} messages: {statistics.median(loads) * 1000:.1f} ms (median of 7), "
              f"file {(Path(d) / 'big.jsonl').stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
