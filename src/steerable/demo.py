"""A scripted demo of the loop: streaming, parallel tools, steering and an interrupt.

Runs with no model and no network (a ScriptedProvider plays the model), so it shows exactly what
the loop does: ``python -m steerable.demo``. Every line printed comes from an event.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TextIO

from steerable import (
    Agent,
    AgentLoop,
    Event,
    EventKind,
    LLMRequest,
    Reply,
    ScriptedProvider,
    Subscription,
    ToolContext,
    tool,
)
from steerable.providers import ScriptStep

FILES = {
    "README.md": "# demo\nA tiny project.\n",
    "config.toml": "[server]\nport = 8080\n",
    "app.py": "print('hello')\n",
}


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a file of the demo project.

    Args:
        path: The file to read.
    """
    await asyncio.sleep(0.3)  # pretend the disk is slow, to show the parallel group
    if path not in FILES:
        raise FileNotFoundError(path)
    return FILES[path]


@tool
async def write_file(path: str, content: str, ctx: ToolContext) -> str:
    """Write a file of the demo project.

    Args:
        path: The file to write.
        content: The new content.
    """
    for pct in (25, 50, 75, 100):
        await asyncio.sleep(0.1)
        ctx.progress(f"{pct}%")
    FILES[path] = content
    return f"wrote {len(content)} bytes to {path}"


@tool
async def run_tests(suite: str, ctx: ToolContext) -> str:
    """Run one test suite (slow).

    Args:
        suite: unit, integration or e2e.
    """
    for i in range(1, 4):
        await asyncio.sleep(0.15)
        ctx.progress(f"{suite} test {i} passed")
    return f"{suite}: 3 passed"


def _answer_after_steering(request: LLMRequest) -> Reply:
    last_user = next(m.text for m in reversed(request.messages) if m.role == "user")
    return Reply(text=f"Understood — you said: “{last_user}”. I kept the backup and stopped there.")


SCRIPT: list[ScriptStep] = [
    Reply(text="Let me look at the project.",
          tool_calls=[("read_file", {"path": "README.md"}), ("read_file", {"path": "config.toml"}),
                      ("read_file", {"path": "app.py"})]),
    Reply(text="The project is a tiny app: **app.py** prints hello and the server listens on port 8080."),
    Reply(text="I will back up the config, then change the port.",
          tool_calls=[("write_file", {"path": "config.toml.bak", "content": "[server]\nport = 8080\n"}),
                      ("write_file", {"path": "config.toml", "content": "[server]\nport = 9090\n"})]),
    _answer_after_steering,
    Reply(text="Running the three suites.",
          tool_calls=[("run_tests", {"suite": "unit"}), ("run_tests", {"suite": "integration"}),
                      ("run_tests", {"suite": "e2e"})]),
    Reply(text="Stopped as asked: unit tests passed; integration and e2e did not run."),
    Reply(text="This answer is never seen: the turn is aborted while the model thinks.", delay=5),
]


class Printer:
    """Renders events as readable lines."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.t0 = time.monotonic()
        self.streaming = False

    def line(self, text: str) -> None:
        if self.streaming:
            self.out.write("\n")
            self.streaming = False
        self.out.write(f"[{time.monotonic() - self.t0:5.2f}s] {text}\n")
        self.out.flush()

    def show(self, e: Event) -> None:  # one branch per event kind; `e.kind is` narrows `e`
        if e.kind is EventKind.TURN_START:
            self.line(f"▶ turn: {e.input}")
        elif e.kind is EventKind.LLM_DELTA:
            if not self.streaming:
                self.out.write(f"[{time.monotonic() - self.t0:5.2f}s]   assistant: ")
                self.streaming = True
            self.out.write(e.text)
            self.out.flush()
        elif e.kind is EventKind.TOOL_EXEC_START:
            self.line(f"  ⚙ {e.tool_name}({_args(e.arguments)}) started")
        elif e.kind is EventKind.TOOL_EXEC_PROGRESS:
            self.line(f"    … {e.tool_name}: {e.text}")
        elif e.kind is EventKind.TOOL_EXEC_END:
            mark = "✗" if e.is_error else "✓"
            self.line(f"  {mark} {e.tool_name} done in {e.duration:.2f}s")
        elif e.kind is EventKind.TOOL_EXEC_SKIPPED:
            self.line(f"  ⤼ {e.tool_name} skipped ({e.reason})")
        elif e.kind is EventKind.STEERING_INJECTED:
            self.line(f"  ↪ steering reached the model: {e.text}")
        elif e.kind is EventKind.INTERRUPT_RECEIVED:
            self.line(f"  ■ interrupt ({e.mode})")
        elif e.kind is EventKind.TURN_END:
            self.line(f"■ turn {e.status}: {e.iterations} LLM calls, {e.duration:.2f}s\n")


def _args(arguments: object) -> str:
    items = dict(arguments).items() if isinstance(arguments, dict) else ()
    return ", ".join(f"{k}={str(v)[:20]!r}" for k, v in items)


async def _render(sub: Subscription, printer: Printer) -> None:
    async for event in sub:
        printer.show(event)


async def main(out: TextIO = sys.stdout) -> int:
    provider = ScriptedProvider(SCRIPT)
    agent = Agent(name="demo", instructions="You are a careful coding agent.", provider=provider,
                  tools=[read_file, write_file, run_tests])
    loop = AgentLoop(agent)
    printer = Printer(out)
    sub = loop.subscribe()
    renderer = asyncio.create_task(_render(sub, printer))
    try:
        printer.line("Three read-only reads run in parallel (0.3 s each):")
        await loop.run_turn("What is this project?", session_id="demo")

        printer.line("Two writes run one at a time; we steer while the first one runs:")
        steer = loop.subscribe(kinds=[EventKind.TOOL_EXEC_START])
        handle = loop.start_turn("Change the port to 9090.", session_id="demo")
        await anext(steer)
        loop.inject_steering("Wait — only make the backup for now.", session_id="demo")
        await handle

        printer.line("Three test suites; a graceful interrupt while the first runs:")
        handle = loop.start_turn("Run the tests.", session_id="demo")
        await asyncio.sleep(0.2)
        loop.interrupt_graceful(session_id="demo", hint="Stop and tell me where you got to.")
        result = await handle

        saved = len(loop.session_messages("demo"))
        printer.line("A hard abort while the model is thinking rolls the turn back:")
        handle = loop.start_turn("Deploy it.", session_id="demo")
        await asyncio.sleep(0.2)
        loop.interrupt_hard(session_id="demo")
        aborted = await handle
        after = len(loop.session_messages("demo"))
        printer.line(f"The session holds {after} messages, as before the aborted turn ({saved}).")
        ok = result.status.value == "interrupted" and aborted.status.value == "aborted"
        return 0 if ok and after == saved else 1
    finally:
        await loop.aclose()
        await renderer


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
