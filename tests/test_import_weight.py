"""The core imports no heavy dependency it does not need yet: ``pydantic`` (~60 ms) comes with
the first ``@tool`` or ``output_type``, the HTTP client with the first HTTP provider, and
so on. A module-level import of one of them in the core shows up here (not as a timing)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic", "pydantic_core", "httpx", "httpcore", "opentelemetry", "redis", "starlette",
         "jsonschema", "temporalio", "mcp")

PROGRAM = """
import json, sys
from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool
import asyncio

async def main():
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="hi")])))
    result = await loop.run_turn("hello", session_id="s")
    assert result.text == "hi"
    await loop.aclose()

asyncio.run(main())
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_the_core_and_a_turn_without_tools_import_no_heavy_dependency() -> None:
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         check=True, timeout=120)
    loaded = set(json.loads(out.stdout))
    assert "steerable" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_an_output_type_brings_pydantic_in() -> None:
    program = ("import sys\nfrom steerable import Agent, ScriptedProvider\n"
               "Agent(provider=ScriptedProvider([]), output_type=list[int])\n"
               "print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "True"
