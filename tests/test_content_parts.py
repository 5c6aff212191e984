"""Content parts in a turn: the model gets them, the history keeps them, every text view (events,
receipts, titles, summaries, token estimates) reads their text, and nothing is lost on the way."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    FilePart,
    ImagePart,
    Message,
    Reply,
    ScriptedProvider,
    TextPart,
    TurnStatus,
    tool,
)
from steerable._core._compaction import estimate_tokens
from steerable._parts import as_content, text_of
from steerable.cli._attach import part_from_file
from steerable.errors import SessionBusyError
from steerable.storage import JSONLSessionStore
from tests.conftest import of

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
PARTS = [TextPart("what is in this picture?"), ImagePart(data=PNG, media_type="image/png")]


def test_message_content_is_text_or_parts() -> None:
    m = Message("user", PARTS)
    assert m.content == tuple(PARTS) and m.parts == tuple(PARTS)
    assert m.text == "what is in this picture?\n[image: image/png, 208 B]"
    assert Message("user", "hi").text == "hi" and Message("user", "hi").parts == ()
    assert hash(m) == hash(Message("user", list(PARTS)))  # a list is kept as a tuple
    with pytest.raises(TypeError, match="TextPart, ImagePart or FilePart"):
        Message("user", ["not a part"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="media_type"):
        ImagePart(data=PNG)
    with pytest.raises(ValueError, match="exactly one"):
        ImagePart(data=PNG, media_type="image/png", url="https://x.test/a.png")
    with pytest.raises(ValueError, match="image/"):
        ImagePart(data=PNG, media_type="application/pdf")
    assert "data" not in repr(ImagePart(data=PNG, media_type="image/png"))  # no bytes in logs


@given(st.lists(st.text(max_size=20).map(TextPart) | st.binary(max_size=50).map(
    lambda b: FilePart(data=b, media_type="application/pdf", name="x.pdf")), max_size=6))
def test_the_text_view_holds_every_text_part_and_a_placeholder_per_file(parts: list[Any]) -> None:
    text = text_of(as_content(parts))
    for p in parts:
        assert (p.text if isinstance(p, TextPart) else "[file: x.pdf, application/pdf, ") in text


def test_token_estimates_count_an_image_as_much_more_than_its_placeholder() -> None:
    assert estimate_tokens([Message("user", PARTS)]) > 1000 > estimate_tokens(
        [Message("user", PARTS[0].text)])


async def test_a_turn_with_parts_sends_them_and_keeps_them(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply(text="a cat")])
    store = JSONLSessionStore(tmp_path)
    loop = AgentLoop(Agent(provider=provider), store=store)
    sub = loop.subscribe()
    result = await loop.run_turn(PARTS, session_id="s")
    await loop.aclose()
    assert result.status is TurnStatus.COMPLETED
    assert provider.requests[0].messages[-1] == Message("user", PARTS)
    assert store.load("s") == [Message("user", PARTS), Message("assistant", "a cat")]
    start = of(sub.drain_nowait(), EventKind.TURN_START)[0]
    assert start.input == "what is in this picture?\n[image: image/png, 208 B]"
    assert store.info("s").title == "what is in this picture? [image: image/png, 208 B]"


async def test_a_busy_session_refuses_a_message_with_parts_and_queues_nothing() -> None:
    gate = asyncio.Event()

    async def slow(_request: Any) -> Reply:
        await gate.wait()
        return Reply(text="done")

    loop = AgentLoop(Agent(provider=ScriptedProvider([slow])))
    first = loop.send("first", "s")
    with pytest.raises(SessionBusyError, match="images or files starts a turn of its own"):
        loop.send(PARTS, "s", "follow_up")
    assert loop.queued("s") == []
    gate.set()
    assert (await first).status is TurnStatus.COMPLETED
    await loop.aclose()


async def test_empty_parts_are_refused_like_empty_text() -> None:
    loop = AgentLoop(Agent(provider=ScriptedProvider([])))
    with pytest.raises(ValueError, match="must not be empty"):
        loop.start_turn([], session_id="s")
    await loop.aclose()


async def test_a_cancelled_turn_with_an_image_resumes_with_the_image(tmp_path: Path) -> None:
    gate = asyncio.Event()

    @tool
    async def look() -> str:
        """Look closer."""
        return "whiskers"

    async def wait(_request: Any) -> Reply:
        await gate.wait()
        return Reply(tool_calls=[("look", {})])

    store = JSONLSessionStore(tmp_path)
    first = AgentLoop(Agent(name="a", provider=ScriptedProvider([wait]), tools=[look]),
                      store=store)
    handle = first.start_turn(PARTS, session_id="s")
    await asyncio.sleep(0.05)
    first.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    assert (await handle).status is TurnStatus.CANCELLED
    await first.aclose()
    provider = ScriptedProvider([Reply(text="a cat")])
    second = AgentLoop(Agent(name="a", provider=provider, tools=[look]), store=store)
    resumed = second.resume("s")
    assert resumed is not None and (await resumed).status is TurnStatus.COMPLETED
    await second.aclose()
    assert provider.requests[0].messages[-3] == Message("user", PARTS)
    assert store.load("s")[0] == Message("user", PARTS)


def test_part_from_file_guesses_the_kind_and_refuses_what_it_cannot_take(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "notes").write_text("plain words\n")
    (tmp_path / "big.pdf").write_bytes(b"%PDF" + bytes(2000))
    assert part_from_file(tmp_path / "a.png", 10_000) == ImagePart(data=PNG, media_type="image/png")
    assert part_from_file(tmp_path / "notes", 10_000) == FilePart(
        data=b"plain words\n", media_type="text/plain", name="notes")
    with pytest.raises(ValueError, match=r"2.0 KB is over the 1.0 KB limit"):
        part_from_file(tmp_path / "big.pdf", 1000)
    with pytest.raises(ValueError, match="No such file"):
        part_from_file(tmp_path / "missing.png", 1000)
    with pytest.raises(ValueError, match="not a regular file"):
        part_from_file(tmp_path, 1000)
