"""The CLI with a sub-agent: the sub-turn tree rendered, and child events in --json."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, tool
from steerable.cli._app import Redactor
from steerable.cli._render import TurnView
from tests.coding.test_cli import script, steerable

# The explorer shares the coder's (scripted) provider: its reply is the script's second step.
STEPS = [
    {"tool_calls": [["subagent", {"agent": "explorer", "task": "where is the greeting?"}]]},
    {"text": "Exploring.", "tool_calls": [["grep", {"pattern": "hello"}]]},
    {"text": "a.txt line 1 says hello"},
    {"text": "The greeting is in a.txt."},
]


def _ws(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    return root


def test_run_json_carries_the_child_events(cli_env: dict[str, str], tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    res = steerable(cli_env, "run", "find the greeting", "--json", "--explorer", "--provider",
                    "scripted", "--script", script(tmp_path, STEPS), "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    top = events[0]["turn_id"]
    spawn = next(e for e in events if e["kind"] == "subturn_spawn")
    child = [e for e in events if e["turn_id"] == spawn["child_turn_id"]]
    assert child[0]["kind"] == "turn_start" and child[0]["agent"] == "explorer"
    assert all(e["parent_turn_id"] == top for e in child)
    assert any(e["kind"] == "tool_exec_end" and e["tool_name"] == "grep" for e in child)
    end = next(e for e in events if e["kind"] == "subturn_end")
    assert end["status"] == "completed" and end["child_turn_id"] == spawn["child_turn_id"]
    assert events[-1]["kind"] == "turn_end" and events[-1]["turn_id"] == top


def test_run_renders_the_sub_turn_tree(cli_env: dict[str, str], tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    res = steerable(cli_env, "run", "find the greeting", "--explorer", "--provider", "scripted",
                    "--script", script(tmp_path, STEPS), "--workspace", str(ws))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    opening = next(i for i, ln in enumerate(lines) if "┌ explorer: where is the greeting?" in ln)
    closing = next(i for i, ln in enumerate(lines) if "└ explorer completed" in ln)
    grep = next(i for i, ln in enumerate(lines) if "✓ grep" in ln)
    assert opening < grep < closing
    assert lines[grep].startswith("  ✓ grep")  # indented under its parent
    assert not lines[opening].startswith(" ")
    assert "The greeting is in a.txt." in res.stdout


async def test_view_marks_background_children_and_their_results() -> None:
    child_ended = asyncio.Event()

    @tool(read_only=True)
    async def wait_for_bg() -> str:
        """Wait until the background child has ended."""
        await child_ended.wait()
        return "ended"

    child = Agent(name="bg", provider=ScriptedProvider([Reply(text="bg found it")]))
    # The child ends while the parent waits in a tool: its result reaches the next call (with
    # no wait, whether an instant child ends before the parent's next call is a race).
    main = Agent(name="main", tools=[wait_for_bg], provider=ScriptedProvider([
        Reply(tool_calls=[("spawn", {"agent": "bg", "task": "look"})]),
        Reply(tool_calls=[("wait_for_bg", {})]),
        Reply(text="ok")]),
        subagents=[child])
    loop = AgentLoop(main)
    loop.observe(lambda e: child_ended.set(), [EventKind.SUBTURN_END])
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go")
    await loop.wait_idle()
    console = Console(width=100, record=True, color_system=None)
    view = TurnView(Redactor())
    for event in sub.drain_nowait():
        for block in view.handle(event):
            console.print(block)
    text: Any = console.export_text()
    assert "┌ bg (background): look" in text
    assert "└ bg completed" in text
    assert "↳ result of bg reached the model" in text
