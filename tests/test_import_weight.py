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


# Modules of the engine's optional parts and of the HTTP providers: a turn that calls a tool
# with the scripted provider needs none of them, so importing the core must not load them
# (each costs its unmarshalling and its body, ~0.1-0.5 ms, at every program's start).
OPTIONAL = ("steerable._core._answer", "steerable._core._approval", "steerable._core._output",
            "steerable._core._subturn_tools", "steerable._core._summarize",
            "steerable.drivers._composites", "steerable.drivers._gateway",
            "steerable.drivers._recorder", "steerable.drivers._session_driver",
            "steerable.drivers._turnloop", "steerable.providers._fallback",
            "steerable.providers._retry", "steerable.providers._select",
            "steerable.providers._timeouts", "steerable.providers._http",
            "steerable.providers.openai", "steerable._parts_json")

TOOL_TURN = """
import json, sys
from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool
import asyncio

@tool
async def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b

async def main():
    provider = ScriptedProvider([Reply(tool_calls=[("add", {"a": 1, "b": 2})]), Reply(text="3")])
    loop = AgentLoop(Agent(provider=provider, tools=[add]))
    result = await loop.run_turn("hello", session_id="s")
    assert result.text == "3" and provider.requests[1].messages[-1].content == "3"
    await loop.aclose()

asyncio.run(main())
print(json.dumps(sorted(name for name in sys.modules if name.startswith("steerable"))))
"""


def test_a_turn_with_a_tool_call_loads_none_of_the_optional_modules() -> None:
    out = subprocess.run([sys.executable, "-c", TOOL_TURN], capture_output=True, text=True,
                         check=True, timeout=120)
    loaded = set(json.loads(out.stdout))
    assert "steerable._core._turn" in loaded  # the program did run a turn
    assert loaded.isdisjoint(OPTIONAL), sorted(loaded & set(OPTIONAL))
