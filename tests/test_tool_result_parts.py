"""Images and files a tool returns: what a tool may return, the tool message the model gets,
the text every event shows, hooks that rewrite the text keeping the parts, and the history,
the Temporal boundary and the JSONL store keeping them byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    FilePart,
    HookAction,
    HookDecision,
    ImagePart,
    Reply,
    ScriptedProvider,
    TextPart,
    ToolResult,
    tool,
)
from steerable._hooks import ToolResultContext
from steerable.storage import JSONLSessionStore
from steerable.temporal._codec import result_from_json, result_to_json
from steerable.tools._base import result_from_return
from tests.conftest import of

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(100))
IMAGE = ImagePart(data=PNG, media_type="image/png")
PDF = FilePart(data=b"%PDF-1.7 x", media_type="application/pdf", name="a.pdf")


def test_what_a_tool_may_return_with_images_and_files() -> None:
    assert result_from_return(IMAGE) == ToolResult("", parts=(IMAGE,))
    assert result_from_return(["one", IMAGE, TextPart("two"), PDF]) == ToolResult(
        "one\ntwo", parts=(IMAGE, PDF))
    assert result_from_return((IMAGE,)).parts == (IMAGE,)
    assert result_from_return(["a", "b"]).content == '["a", "b"]'  # no part: JSON, as before
    with pytest.raises(TypeError, match="only str, TextPart, ImagePart and FilePart, not int"):
        result_from_return([IMAGE, 3])
    with pytest.raises(TypeError, match="TextPart, ImagePart or FilePart"):
        ToolResult("x", parts=("not a part",))  # type: ignore[arg-type]
    assert ToolResult("x", parts=[IMAGE]).parts == (IMAGE,)  # type: ignore[arg-type]


async def test_a_tool_returning_an_image_reaches_the_model_the_events_and_the_store(
        tmp_path: Path) -> None:
    @tool(read_only=True)
    async def snap() -> list[object]:
        """A screenshot."""
        return ["the page", IMAGE]

    @tool(read_only=True)
    async def bad() -> list[object]:
        """Returns what cannot be sent."""
        return [IMAGE, object()]

    provider = ScriptedProvider([Reply(tool_calls=[("snap", {}), ("bad", {})]),
                                 Reply(text="done")])
    store = JSONLSessionStore(tmp_path)
    loop = AgentLoop(Agent(provider=provider, tools=[snap, bad]), store=store)
    sub = loop.subscribe(buffer=1000)
    await loop.run_turn("look", session_id="s")
    await loop.aclose()
    snap_msg, bad_msg = provider.requests[1].messages[-2:]
    assert snap_msg.content == (TextPart("the page"), IMAGE) and not snap_msg.is_error
    assert bad_msg.is_error and "returned a value that is not text" in bad_msg.text
    ends = {e.tool_name: e.content for e in of(sub.drain_nowait(), EventKind.TOOL_EXEC_END)}
    assert ends["snap"] == "the page\n[image: image/png, 108 B]"
    assert JSONLSessionStore(tmp_path).load("s")[2] == snap_msg  # the bytes came back


async def test_a_hook_rewriting_the_text_keeps_the_images() -> None:
    class Note:
        def after_tool(self, ctx: ToolResultContext) -> HookDecision:
            return HookDecision(HookAction.MODIFY, result=ctx.result.content + " (checked)")

    @tool(read_only=True)
    async def snap() -> list[object]:
        """A screenshot."""
        return ["the page", IMAGE]

    provider = ScriptedProvider([Reply(tool_calls=[("snap", {})]), Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=[snap]))
    loop.register_hook(Note())
    await loop.run_turn("look", session_id="s")
    await loop.aclose()
    assert provider.requests[1].messages[-1].content == (TextPart("the page (checked)"), IMAGE)


_parts = st.lists(st.builds(lambda data, image: ImagePart(data=data, media_type="image/png")
                            if image else FilePart(data=data, media_type="application/pdf"),
                            st.binary(min_size=1, max_size=64), st.booleans()), max_size=3)


@given(text=st.text(max_size=20), parts=_parts, is_error=st.booleans())
def test_a_result_with_parts_crosses_the_temporal_boundary_unchanged(
        text: str, parts: list[Any], is_error: bool) -> None:
    result = ToolResult(text, is_error, {"k": 1}, tuple(parts))
    assert result_from_json(result_to_json(result)) == result
