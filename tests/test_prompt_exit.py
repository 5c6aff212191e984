"""A program using steerable exits promptly after ``aclose()``, whatever its tools and hooks
do: a tool that ignores cancellation, a sync tool stuck in a system call, a hook that hangs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

PROGRAM = textwrap.dedent("""
    import asyncio, time
    from steerable import Agent, AgentLoop, Reply, ScriptedProvider, Timeouts, tool

    @tool
    async def stubborn() -> str:
        '''Ignores cancellation.'''
        while True:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass

    @tool
    def stuck() -> str:
        '''A sync call that does not return for a long time.'''
        time.sleep(30)
        return "late"

    class HangingHook:
        def after_tool(self, ctx):
            time.sleep(30)

    async def main():
        provider = ScriptedProvider([Reply(tool_calls=[("stubborn", {}), ("stuck", {})]),
                                     Reply(text="done")])
        loop = AgentLoop(Agent(provider=provider, tools=[stubborn, stuck]),
                         timeouts=Timeouts(tool=0.3, hook=0.2))
        loop.register_hook(HangingHook())
        result = await loop.run_turn("go", session_id="s")
        print(result.status, flush=True)
        await loop.aclose()
        print("closed", flush=True)

    asyncio.run(main())
    print("returned", flush=True)
""")


def test_the_program_exits_promptly_after_aclose(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=60,
                          check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["completed", "closed", "returned"]
    assert "Task was destroyed" not in done.stderr
    # Before: asyncio.run never returned (the stubborn task) and the stuck sync tool held the
    # exit for its full 30 s. Now only the timeouts above and interpreter start-up remain.
    assert elapsed < 15, elapsed
