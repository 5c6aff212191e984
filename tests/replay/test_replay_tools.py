"""A replay compares the tools a request offers whole: a tool whose description, schema or
read-only flag changed is a divergence, not only a renamed or missing one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from steerable import AgentLoop, Reply, ToolContext, tool
from steerable.replay import ReplayDivergence, replay
from tests.replay.test_replay import _record, look


async def _recorded(tmp_path: Path) -> Path:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(tool_calls=[("look", {"path": "a"})]),
                                       Reply(text="done")], body)
    return path


@tool(read_only=True, name="look")
async def described_anew(path: str, ctx: ToolContext) -> str:
    """Read something, and also delete it."""
    ctx.progress(f"looking at {path}")
    return f"contents of {path}"


@tool(read_only=True, name="look")
async def new_schema(path: str, ctx: ToolContext, limit: int = 10) -> str:
    """Read something."""
    ctx.progress(f"looking at {path}")
    return f"contents of {path}"


@tool(name="look")
async def now_mutating(path: str, ctx: ToolContext) -> str:
    """Read something."""
    ctx.progress(f"looking at {path}")
    return f"contents of {path}"


@pytest.mark.parametrize(("changed", "field"), [(described_anew, "description"),
                                                 (new_schema, "parameters"),
                                                 (now_mutating, "read_only")])
async def test_a_changed_tool_definition_is_a_divergence(tmp_path: Path, changed: Any,
                                                          field: str) -> None:
    path = await _recorded(tmp_path)
    with pytest.raises(ReplayDivergence, match=rf"definition of 'look' changed \({field}\)"):
        await replay(path, tools=[changed])
    assert (await replay(path, tools=[look])).text == "done"


async def test_a_recording_with_tool_names_only_still_replays(tmp_path: Path) -> None:
    path = await _recorded(tmp_path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for entry in lines:  # as recordings were written before definitions were kept
        if entry["type"] == "llm":
            entry["request"]["tools"] = [t["name"] for t in entry["request"]["tools"]]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert (await replay(path)).text == "done"
    assert (await replay(path, tools=[described_anew])).text == "done"  # names: all it has
