"""Subprocess for the kill -9 and multi-process store tests: appends numbered two-message turns
to session ``s`` of a SQLite or Redis store until killed or done.

argv: kind (sqlite|redis), target (path|url), writer name, number of turns (0 = forever)
"""

import itertools
import sys

from steerable import Message, TurnRecord
from steerable.storage import RedisSessionStore, SQLiteSessionStore

kind, target, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = SQLiteSessionStore(target) if kind == "sqlite" else RedisSessionStore(target)
turns = range(count) if count else itertools.count()
for i in turns:
    pad = "x" * (i * 997 % 20_000)
    store.append("s", [Message("user", f"{name} {i} question {pad}"),
                       Message("assistant", f"{name} {i} answer")],
                 TurnRecord(f"turn_{name}_{i}", "completed", 1))
    if i == 0:
        print("ready", flush=True)
