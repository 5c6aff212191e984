"""A recorded turn whose input holds an image replays with the same image: the model is asked
with the same parts and the session ends the same."""

from __future__ import annotations

from pathlib import Path

from steerable import (
    Agent,
    AgentLoop,
    ImagePart,
    Message,
    Reply,
    ScriptedProvider,
    TextPart,
    tool,
)
from steerable.replay import Recorder, replay

PNG = b"\x89PNG\r\n\x1a\n" + b"AKIAABCDEFGHIJKLMNOP" + bytes(range(100))  # a key-shaped run


async def test_a_turn_with_parts_is_recorded_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    provider = ScriptedProvider([Reply(text="a cat")])
    loop = AgentLoop(Agent(name="main", provider=provider))
    parts = [TextPart("what is it?"), ImagePart(data=PNG, media_type="image/png")]
    async with Recorder(loop, path):
        await loop.run_turn(parts, session_id="s1")
    await loop.aclose()
    out = await replay(path)
    assert out.text == "a cat"
    assert out.sessions["s1"] == [Message("user", parts), Message("assistant", "a cat")]


async def test_a_tools_image_is_recorded_and_replayed(tmp_path: Path) -> None:
    @tool(read_only=True)
    async def snap() -> list[object]:
        """A screenshot."""
        return ["the page", ImagePart(data=PNG, media_type="image/png")]

    path = tmp_path / "run.jsonl"
    provider = ScriptedProvider([Reply(tool_calls=[("snap", {})]), Reply(text="a button")])
    loop = AgentLoop(Agent(name="main", provider=provider, tools=[snap]))
    async with Recorder(loop, path):
        await loop.run_turn("look", session_id="s1")
    await loop.aclose()
    out = await replay(path)
    result = out.sessions["s1"][2]
    assert result.role == "tool" and result.parts == (
        TextPart("the page"), ImagePart(data=PNG, media_type="image/png"))
    assert out.sessions["s1"] == loop.session_messages("s1")
