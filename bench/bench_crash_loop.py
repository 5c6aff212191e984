"""The crash loop: a multi-tool turn killed with SIGKILL at random moments, then resumed.

    python bench/bench_crash_loop.py [RUNS]      # default 200

Each run starts a worker process on a JSONL store, kills it (kill -9) at a random moment,
half the time resumes it in a second worker and kills that one too, then resumes it to the end
in a third. The turn: three LLM responses asking for four tools each (two read-only in
parallel, two mutating), then a final answer. Every request, response and tool start/end is
logged to a ledger; after each kill the checkpoint left on disk is read. Goals, all 0: turns
lost, sessions inconsistent, LLM responses re-requested after being checkpointed, tool calls
run twice other than the one in flight (a re-run without ``ToolContext.resumed`` set, or of a
call whose result the checkpoint held).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from steerable import Agent, AgentLoop, Message, ToolCall, ToolContext, tool
from steerable.providers._base import LLMRequest, StreamEnd, TextDelta, ToolCallChunk
from steerable.storage import Checkpoint, JSONLSessionStore

RESPONSES_WITH_TOOLS = 3
KILL_WINDOW = 0.35  # seconds after the worker is ready; a whole turn takes about 0.25 s


# -- the worker ---------------------------------------------------------------------------------

class Ledger:
    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, line: str) -> None:
        with open(self.path, "a") as fh:
            fh.write(f"{line} {os.getpid()}\n")


class Model:
    """Deterministic: the k-th response (k = assistant messages so far) asks for 4 tools."""

    def __init__(self, log: Ledger) -> None:
        self.log = log

    async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
        k = sum(1 for m in request.messages if m.role == "assistant")
        self.log(f"request {k}")
        await asyncio.sleep(random.uniform(0, 0.01))
        if k < RESPONSES_WITH_TOOLS:
            yield TextDelta(f"step {k}")
            for j, (name, x) in enumerate((("look", "a"), ("look", "b"), ("act", "c"), ("act", "d"))):
                yield ToolCallChunk(ToolCall(f"r{k}c{j}", name, {"key": f"{k}.{x}"}))
        else:
            yield TextDelta("done")
        self.log(f"response {k}")
        yield StreamEnd(finish_reason="stop")

    async def aclose(self) -> None:
        return None


def make_agent(log: Ledger) -> Agent:
    async def work(key: str, ctx: ToolContext) -> str:
        log(f"start {key} {int(ctx.resumed)}")
        await asyncio.sleep(random.uniform(0, 0.015))
        log(f"end {key}")
        return f"did {key}"

    @tool(read_only=True)
    async def look(key: str, ctx: ToolContext) -> str:
        """Look."""
        return await work(key, ctx)

    @tool
    async def act(key: str, ctx: ToolContext) -> str:
        """Act."""
        return await work(key, ctx)

    return Agent(name="crash", provider=Model(log), tools=[look, act], max_iterations=10)


async def worker(data: str, sid: str, ledger: str, mode: str) -> None:
    log = Ledger(ledger)
    loop = AgentLoop(make_agent(log), store=JSONLSessionStore(data))
    log("ready")
    if mode == "start":
        handle = loop.start_turn("go", session_id=sid)
        log("accepted")
    else:
        maybe = loop.resume(sid)
        if maybe is None:
            log("nothing")
            return
        handle = maybe
    result = await handle
    log(f"finished {result.status.value}")


# -- the parent ---------------------------------------------------------------------------------

def run_worker(data: Path, sid: str, ledger: Path, mode: str, kill: bool) -> None:
    before = ledger.read_text().count("ready") if ledger.exists() else 0
    proc = subprocess.Popen([sys.executable, __file__, "worker", str(data), sid, str(ledger), mode])
    try:
        while (ledger.read_text().count("ready") if ledger.exists() else 0) == before:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited early with {proc.returncode}")
            time.sleep(0.002)
        if kill:
            time.sleep(random.uniform(0, KILL_WINDOW))
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _checkpointed_keys(cp: Checkpoint | None) -> set[str]:
    if cp is None:
        return set()
    done = [m for m in (*cp.messages, *cp.results) if m.role == "tool"]
    return {m.content.removeprefix("did ") for m in done}


def expected_history() -> list[tuple[str, str]]:
    out = [("user", "go")]
    for k in range(RESPONSES_WITH_TOOLS):
        out.append(("assistant", f"step {k}"))
        out += [("tool", f"did {k}.{x}") for x in "abcd"]
    out.append(("assistant", "done"))
    return out


def consistent(history: list[Message]) -> bool:
    if [(m.role, m.content) for m in history] != expected_history():
        return False
    for i, m in enumerate(history):
        if m.tool_calls and [c.id for c in m.tool_calls] != [
                r.tool_call_id for r in history[i + 1:i + 1 + len(m.tool_calls)]]:
            return False
    return True


def one_run(data: Path, ledgers: Path, n: int, tally: Counter[str]) -> None:
    sid, ledger = f"run{n}", ledgers / f"run{n}.log"
    store = JSONLSessionStore(data)
    phases = ["start", "resume"] if random.random() < 0.5 else ["start"]
    checkpointed_responses = 0
    checkpointed_keys: set[str] = set()
    for i, mode in enumerate([*phases, "resume"]):
        mark = len(ledger.read_text().splitlines()) if ledger.exists() else 0
        run_worker(data, sid, ledger, mode, kill=i < len(phases))
        lines = ledger.read_text().splitlines()[mark:]
        for line in lines:
            word, *rest = line.split()
            if word == "request" and int(rest[0]) < checkpointed_responses:
                tally["LLM responses re-requested after being checkpointed"] += 1
            if word == "start" and rest[0] in checkpointed_keys:
                tally["tool calls re-run although the checkpoint held their result"] += 1
        cp = store.load_checkpoint(sid)
        checkpointed_responses = 0 if cp is None else cp.iteration
        checkpointed_keys = _checkpointed_keys(cp)
    lines = ledger.read_text().splitlines()
    starts = [line.split() for line in lines if line.startswith("start ")]
    runs = Counter(s[1] for s in starts)
    for key, count in runs.items():
        if count > 1:
            flags = [s[2] for s in starts if s[1] == key]
            if "0" in flags[1:]:
                tally["tool calls run twice without ToolContext.resumed"] += 1
            else:
                tally["in-flight calls run again with ToolContext.resumed (allowed)"] += 1
    accepted = any(line.startswith("accepted") for line in lines)
    history = store.load(sid)
    if not accepted:
        tally["runs killed before start_turn returned (never accepted)"] += 1
        if history or store.load_checkpoint(sid) is not None:
            tally["of those, kept anyway"] += 1
        return
    if not history or history[-1].content != "done":
        tally["turns lost"] += 1
    elif not consistent(history):
        tally["sessions inconsistent"] += 1
    else:
        tally["turns completed"] += 1
    if store.load_checkpoint(sid) is not None:
        tally["checkpoints left behind"] += 1
    tally["LLM requests in all"] += sum(1 for line in lines if line.startswith("request"))
    tally["processes killed"] += len(phases)


def main(runs: int) -> None:
    tally: Counter[str] = Counter()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        data, ledgers = Path(tmp) / "data", Path(tmp) / "ledgers"
        ledgers.mkdir()
        for n in range(runs):
            one_run(data, ledgers, n, tally)
    print(f"crash loop: {runs} runs in {time.monotonic() - t0:.0f} s "
          f"(load average {os.getloadavg()[0]:.1f})")
    for name in ("turns completed", "turns lost", "sessions inconsistent",
                 "LLM responses re-requested after being checkpointed",
                 "tool calls run twice without ToolContext.resumed",
                 "tool calls re-run although the checkpoint held their result",
                 "in-flight calls run again with ToolContext.resumed (allowed)",
                 "checkpoints left behind", "processes killed", "LLM requests in all",
                 "runs killed before start_turn returned (never accepted)", "of those, kept anyway"):
        print(f"  {name}: {tally[name]}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        asyncio.run(worker(*sys.argv[2:6]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
