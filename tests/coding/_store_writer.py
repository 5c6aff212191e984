"""Subprocess for the SIGKILL test: appends numbered turns to a session until killed."""

import sys

from steerable import Message, TurnRecord
from steerable.storage import JSONLSessionStore

store = JSONLSessionStore(sys.argv[1])
start = int(sys.argv[2])
for i in range(start, start + 100_000):
    pad = "x" * (i * 997 % 40_000)
    store.append("s", [Message("user", f"turn {i} question {pad}"),
                       Message("assistant", f"turn {i} answer")], TurnRecord(f"turn_{i}", "completed", 1))
    if i == start:
        print("ready", flush=True)
