"""Messages that are never lost (SPEC 10): the randomized interleavings, in full, and kill -9.

    python bench/bench_messages.py            # 10,000 in-process scenarios + 20 kill -9 runs
    python bench/bench_messages.py 2000 4     # fewer

The in-process share is ``tests/_message_fuzz.py`` (sends with every policy, steers,
follow-ups, revokes, edits, interrupts, cancels, resumes and simulated crashes, each scenario
seeded). The kill -9 share starts ``tests/durable/crash_worker.py`` in a subprocess, lets it
acknowledge steers, follow-ups or queued sends, kills it with SIGKILL, resumes the session in
this process and checks every acknowledged message ends exactly once. Prints the counts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("STEERABLE_SRC") or str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests._message_fuzz import many  # noqa: E402
from tests.durable.crash_worker import make_tools, store_for  # noqa: E402

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider  # noqa: E402


def _kill_at(data: Path, mode: str, marker: str) -> list[str]:
    log = data.parent / "log"
    log.write_text("")
    proc = subprocess.Popen([sys.executable, "-m", "tests.durable.crash_worker", str(data),
                             str(log), mode], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith(marker) for line in log.read_text().splitlines()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker never reached {marker!r}")
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    return log.read_text().splitlines()


async def _one_kill(mode: str) -> Counter[str]:
    """One kill -9 and resume: counts of acknowledged messages by their one terminal state,
    and ``lost`` / ``duplicated``."""
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        marker = "acked all" if mode.startswith("send") else "acked follow_up"
        lines = _kill_at(data, mode, marker)
        acked = {line.split()[-1]: line.split()[1] for line in lines
                 if line.startswith("acked ") and line != "acked all"}
        provider = ScriptedProvider([Reply(text="done")] * 8)
        loop = AgentLoop(Agent(name="crash", provider=provider, tools=make_tools(lambda _: None)),
                         store=store_for(str(data), mode))
        sub = loop.subscribe(kinds=[EventKind.MESSAGE_STATE])
        handle = loop.resume("s")
        if handle is not None:
            await handle
        ends: Counter[str] = Counter()
        for event in sub.drain_nowait():
            if event.message_id in acked and event.state.terminal:
                ends[event.message_id] += 1
                counts[event.state.value] += 1
        counts["acknowledged"] += len(acked)
        counts["lost"] += sum(1 for m in acked if ends[m] == 0)
        counts["duplicated"] += sum(1 for m in acked if ends[m] > 1)
        history = [m.content for m in loop.session_messages("s") if m.role == "user"]
        counts["duplicated"] += sum(n - 1 for n in Counter(history).values() if n > 1)
        await loop.aclose()
    return counts


async def main(scenarios: int, kills: int) -> None:
    started = time.perf_counter()
    tally = await many(range(scenarios))
    took = time.perf_counter() - started
    print(f"in-process: {tally.scenarios} scenarios in {took:.1f} s, "
          f"{sum(tally.actions.values())} actions ({dict(sorted(tally.actions.items()))})")
    print(f"  {tally.accepted} messages accepted, {tally.refused} refused, {tally.crashes} "
          f"simulated crashes; terminal states {dict(sorted(tally.states.items()))}")
    print(f"  lost {tally.lost}, delivered twice {tally.duplicated}, "
          f"broken promises {len(tally.wrong)}")
    for line in tally.wrong[:10]:
        print("   ", line)
    modes = ["steer_jsonl", "steer_sqlite", "send_jsonl", "send_sqlite"]
    total: Counter[str] = Counter()
    started = time.perf_counter()
    for i in range(kills):
        total.update(await _one_kill(modes[i % len(modes)]))
    if kills:
        print(f"kill -9: {kills} runs in {time.perf_counter() - started:.1f} s, "
              f"{total['acknowledged']} acknowledged messages: delivered {total['delivered']}, "
              f"returned {total['returned']}; lost {total['lost']}, "
              f"duplicated {total['duplicated']}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(args[0] if args else 10_000, args[1] if len(args) > 1 else 20))
