"""Recordings of runs with sub-turns (sync ``subagent`` and async ``spawn``) replay as well."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, event_to_dict
from steerable.replay import Recorder, load_recording, replay

IGNORED = {"time", "seq", "duration", "turn_id", "parent_turn_id", "child_turn_id", "request_id",
           "message_id", "origin_id", "request_seq"}


def _comparable(events: list[Any]) -> list[dict[str, Any]]:
    """Events without times and ids (a spawn's result names its child's fresh turn id)."""
    out = []
    for e in events:
        d = e if isinstance(e, dict) else event_to_dict(e)
        out.append({k: re.sub(r"turn_[0-9a-f]{12}", "turn_*", v) if isinstance(v, str) else v
                    for k, v in d.items() if k not in IGNORED})
    return out


def _team(main_script: list[Any], kid_script: list[Any]) -> Agent:
    kid = Agent(name="researcher", description="finds things",
                provider=ScriptedProvider(kid_script))
    return Agent(name="main", instructions="lead", provider=ScriptedProvider(main_script),
                 subagents=[kid])


async def _record(path: Path, agent: Agent, text: str = "what is X?") -> Any:
    loop = AgentLoop(agent)
    async with Recorder(loop, path):
        result = await loop.run_turn(text, session_id="s1")
        await loop.wait_idle()
    await loop.aclose()
    return result, loop


async def test_sync_subagent_replays_with_the_child_turn(tmp_path: Path) -> None:
    path = tmp_path / "sync.jsonl"
    live, loop = await _record(path, _team(
        [Reply(tool_calls=[("subagent", {"agent": "researcher", "task": "find X"})]),
         Reply(text="X=42")],
        [Reply(text="X is 42")]))
    rec = load_recording(path)
    assert {e["agent"] for e in rec.of_type("llm")} == {"main", "researcher"}
    assert "subagent" not in [t["name"] for t in rec.header["agents"]["main"]["tools"]]
    out = await replay(path)
    assert out.text == live.text == "X=42"
    assert _comparable(list(out.events)) == _comparable(rec.events)
    child_starts = [e for e in out.events if e.kind is EventKind.TURN_START and e.parent_turn_id]
    spawn = next(e for e in out.events if e.kind is EventKind.SUBTURN_SPAWN)
    assert child_starts[0].turn_id == spawn.child_turn_id  # fresh ids, consistently mapped
    assert out.sessions["s1"] == loop.session_messages("s1")


async def test_async_spawn_delivery_replays(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def main_second(request: Any) -> Reply:
        gate.set()  # the child may finish only once the parent has moved on
        return Reply(text="waiting for the researcher")

    async def kid_answer(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="found it")

    path = tmp_path / "async.jsonl"
    live, _ = await _record(path, _team(
        [Reply(tool_calls=[("spawn", {"agent": "researcher", "task": "look around"})]),
         main_second],
        [kid_answer]))
    rec = load_recording(path)
    kinds = [e["kind"] for e in rec.events]
    assert "subturn_spawn" in kinds and "subturn_end" in kinds
    out = await replay(path)
    assert out.text == live.text
    assert _comparable(list(out.events)) == _comparable(rec.events)


async def test_a_delivered_async_result_replays(tmp_path: Path) -> None:
    from steerable import tool

    kid_done = asyncio.Event()

    async def kid_answer(request: Any) -> Reply:
        kid_done.set()
        return Reply(text="the answer is 7")

    @tool(read_only=True)
    async def wait_a_bit() -> str:
        """Wait until the researcher has answered."""
        await kid_done.wait()
        await asyncio.sleep(0.05)  # let the child's turn end before this tool does
        return "waited"

    kid = Agent(name="researcher", provider=ScriptedProvider([kid_answer]))
    main = Agent(name="main", provider=ScriptedProvider([
        Reply(tool_calls=[("spawn", {"agent": "researcher", "task": "compute"})]),
        Reply(tool_calls=[("wait_a_bit", {})]),
        Reply(text="it is 7")]), subagents=[kid], tools=[wait_a_bit])
    path = tmp_path / "delivered.jsonl"
    live, _ = await _record(path, main)
    rec = load_recording(path)
    assert "subturn_result_delivered" in [e["kind"] for e in rec.events]
    out = await replay(path)
    assert out.text == live.text == "it is 7"
    assert _comparable(list(out.events)) == _comparable(rec.events)
