"""Subprocess for the undo crash and concurrency tests: turns that change files and snapshot.

argv: workspace, data folder, session id, file prefix, number of turns (0: until killed).
"""

import os
import sys
from pathlib import Path

from steerable.coding import Snapshots

ws, data, session, prefix, turns = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], \
    int(sys.argv[5])
snaps = Snapshots(ws, data)
i = 0
while turns == 0 or i < turns:
    snaps.snapshot(session, f"{prefix}turn{i}", f"{prefix}c{i}", "bash", "before")
    (ws / f"{prefix}{i % 7}.txt").write_text(f"{prefix} turn {i}\n" * (i % 50 + 1))
    (ws / f"{prefix}big{i % 3}.bin").write_bytes(os.urandom(1 << 20 + i % 2))
    snaps.snapshot(session, f"{prefix}turn{i}", f"{prefix}c{i}", "bash", "after")
    if i == 0:
        print("ready", flush=True)
    i += 1
