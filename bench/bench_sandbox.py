"""The bash sandbox's start-up cost: one `true` through the bash tool, with and without bwrap.

Prints the median and p90 per call for each, and the difference (the sandbox's extra cost).
Run: python bench/bench_sandbox.py [calls]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from steerable import ToolContext
from steerable.coding import Sandbox, Workspace, make_bash_tool
from steerable.coding._sandbox import bwrap_usable


async def timed(sandbox: Sandbox, root: Path, calls: int) -> list[float]:
    tool = make_bash_tool(Workspace(root), sandbox=sandbox)
    ctx = ToolContext(call_id="c", tool_name="bash", turn_id="t", session_id="s")
    await tool.run(tool.validate({"command": "true"}), ctx)  # warm up (and the bwrap probe)
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await tool.run(tool.validate({"command": "true"}), ctx)
        out.append(time.perf_counter() - t0)
    return out


async def main(calls: int) -> None:
    if bwrap_usable() is None:
        print("bwrap is not usable here; nothing to compare")
        return
    with tempfile.TemporaryDirectory() as root:
        rows = {}
        for _ in range(2):  # alternate, to spread the noise of a shared machine
            for name, box in (("unconfined", Sandbox(enabled=False)), ("bwrap", Sandbox())):
                rows.setdefault(name, []).extend(await timed(box, Path(root), calls // 2))
    for name, times in rows.items():
        times.sort()
        print(f"{name:>10}: median {statistics.median(times) * 1e3:6.2f} ms   "
              f"p90 {times[int(len(times) * 0.9)] * 1e3:6.2f} ms   ({len(times)} calls)")
    extra = statistics.median(rows["bwrap"]) - statistics.median(rows["unconfined"])
    print(f"sandbox extra start-up per call (median): {extra * 1e3:.2f} ms")
    print("load average:", Path("/proc/loadavg").read_text().strip())


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
