"""Content parts on the wire: both HTTP providers against the loopback OpenAI-compatible and
Anthropic-format servers, and the embedded model's refusal of images."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from loopback_llm import (
    LoopbackServer,
    anthropic_frames,
    openai_call_fragments,
    openai_frames,
    stream,
)

from conftest import run_turn
from steerable import (
    Agent,
    AgentLoop,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    TurnStatus,
    tool,
)
from steerable.providers._retry import RetryPolicy
from steerable.providers.anthropic import AnthropicProvider
from steerable.providers.openai import OpenAIProvider
from steerable.storage import JSONLSessionStore

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PDF = b"%PDF-1.4 tiny"
B64 = base64.b64encode(PNG).decode()
PARTS = [TextPart("compare these"), ImagePart(data=PNG, media_type="image/png"),
         ImagePart(url="https://img.test/b.jpg"),
         FilePart(data=PDF, media_type="application/pdf", name="spec.pdf"),
         FilePart(data=b"a,b\n1,2\n", media_type="text/csv", name="t.csv")]


def openai(server: LoopbackServer, retry: RetryPolicy) -> OpenAIProvider:
    return OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test", model="gpt-test",
                          retry=retry, environ={})


def anthropic(server: LoopbackServer, retry: RetryPolicy) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.url, api_key="sk-ant-test", model="claude-test",
                             retry=retry, environ={})


async def test_openai_sends_parts_as_chat_content_parts(server, retry):
    server.add(stream(openai_frames(["two images"])))
    result, _ = await run_turn(openai(server, retry), PARTS)  # type: ignore[arg-type]
    assert result.status is TurnStatus.COMPLETED and result.text == "two images"
    user = server.requests[0].body["messages"][-1]
    assert user == {"role": "user", "content": [
        {"type": "text", "text": "compare these"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        {"type": "image_url", "image_url": {"url": "https://img.test/b.jpg"}},
        {"type": "file", "file": {"filename": "spec.pdf", "file_data":
                                  f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"}},
        {"type": "text", "text": "<file name='t.csv' type='text/csv'>\na,b\n1,2\n\n</file>"},
    ]}


async def test_anthropic_sends_parts_as_image_and_document_blocks(server, retry):
    server.add(stream(anthropic_frames(["two images"])))
    result, _ = await run_turn(anthropic(server, retry), PARTS)  # type: ignore[arg-type]
    assert result.status is TurnStatus.COMPLETED and result.text == "two images"
    (user,) = server.requests[0].body["messages"]
    assert user == {"role": "user", "content": [
        {"type": "text", "text": "compare these"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
        {"type": "image", "source": {"type": "url", "url": "https://img.test/b.jpg"}},
        {"type": "document", "title": "spec.pdf", "source": {
            "type": "base64", "media_type": "application/pdf",
            "data": base64.b64encode(PDF).decode()}},
        {"type": "document", "title": "t.csv", "source": {
            "type": "text", "media_type": "text/plain", "data": "a,b\n1,2\n"}},
    ]}


@pytest.mark.parametrize("make", [openai, anthropic])
async def test_a_part_the_wire_cannot_carry_fails_the_turn_clearly_and_sends_nothing(
        server, retry, make):
    bad = (FilePart(url="https://x.test/a.pdf", media_type="application/pdf")
           if make is openai else FilePart(data=b"PK\x03\x04", media_type="application/zip"))
    result, _ = await run_turn(make(server, retry), [TextPart("read"), bad])
    assert result.status is TurnStatus.ERROR
    assert "by their bytes, not by URL" in str(result.error) or "PDF and text documents only" \
        in str(result.error)
    assert server.requests == []


async def test_parts_in_history_are_sent_again_on_the_next_turn(server, retry, tmp_path: Path):
    """The image comes back from the session's blobs and goes out again, byte for byte."""
    server.add(stream(openai_frames(["a cat"])), stream(openai_frames(["yes, grey"])))
    store = JSONLSessionStore(tmp_path)
    provider = openai(server, retry)
    loop = AgentLoop(Agent(provider=provider), store=store)
    await loop.run_turn(PARTS[:2], session_id="s")
    await loop.aclose()
    loop = AgentLoop(Agent(provider=provider), store=store)
    await loop.run_turn("is it grey?", session_id="s")
    await loop.aclose()
    await provider.aclose()
    assert server.requests[1].body["messages"][0] == server.requests[0].body["messages"][0]


async def test_text_only_messages_keep_their_plain_wire_form(server, retry):
    server.add(stream(openai_frames(["ok"])))
    await run_turn(openai(server, retry), "plain")
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "plain"}]


def test_assistant_and_system_parts_go_as_text() -> None:
    from steerable.providers.anthropic import wire_messages as anthropic_wire
    from steerable.providers.openai import wire_messages as openai_wire
    from steerable.providers.profiles import DEFAULT_PROFILE

    messages = [Message("system", [TextPart("be brief")]),
                Message("assistant", [TextPart("seen"), ImagePart(url="https://x.test/a.png")])]
    assert openai_wire(messages, DEFAULT_PROFILE) == [
        {"role": "system", "content": "be brief"},
        {"role": "assistant", "content": "seen\n[image: https://x.test/a.png]"}]
    assert anthropic_wire(messages) == ("be brief", [{"role": "assistant", "content": [
        {"type": "text", "text": "seen\n[image: https://x.test/a.png]"}]}])




async def test_the_embedded_model_refuses_images_clearly_and_keeps_the_message(
        tmp_path: Path, retry):
    from steerable.providers.local import LocalModelProvider

    # A "server" that must never start: the refusal comes before it.
    never = tmp_path / "llama-server"
    never.write_text(f"#!/bin/sh\ntouch {tmp_path / 'started'}\nexit 1\n")
    never.chmod(0o755)
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    provider = LocalModelProvider(model_path=model, server_binary=str(never), shared=False,
                                  environ={}, retry=retry)
    store = JSONLSessionStore(tmp_path / "sessions")
    loop = AgentLoop(Agent(provider=provider), store=store)
    result = await loop.run_turn(PARTS[:2], session_id="s")
    await loop.aclose()
    await provider.aclose()
    assert result.status is TurnStatus.ERROR
    assert str(result.error) == (
        "the embedded local model reads text only and cannot take [image: image/png, 72 B]; "
        "use a provider with vision (--provider openai or anthropic) for images and PDFs, or "
        "describe the content in text")
    assert not (tmp_path / "started").exists()
    assert store.load("s")[0] == Message("user", PARTS[:2])  # for a provider that can read it


# -- images and files a tool returned ------------------------------------------------------

@tool(read_only=True)
async def snap(page: str) -> list[object]:
    """Take a screenshot of a page."""
    return [f"{page} rendered", ImagePart(data=PNG, media_type="image/png")]


@tool(read_only=True)
async def plain(page: str) -> str:
    """Describe a page in text."""
    return f"{page}: text only"


async def _tool_turn(provider: Any) -> None:
    loop = AgentLoop(Agent(provider=provider, tools=[snap, plain]))
    result = await loop.run_turn("look at both pages", session_id="s")
    await loop.aclose()
    await provider.aclose()
    assert result.status is TurnStatus.COMPLETED, result.error


def _oa_calls() -> list[bytes]:
    return openai_frames(tool_fragments=[
        *openai_call_fragments(0, "call_a", "snap", '{"page": "a"}'),
        *openai_call_fragments(1, "call_b", "plain", '{"page": "b"}')], finish="tool_calls")


def _an_calls() -> list[bytes]:
    return anthropic_frames(tool_uses=[("call_a", "snap", ['{"page": "a"}']),
                                       ("call_b", "plain", ['{"page": "b"}'])],
                            stop_reason="tool_use")


async def test_openai_sends_a_tools_image_in_a_user_message_after_the_results(server, retry):
    server.add(stream(_oa_calls()),
               stream(openai_frames(["a chart and some text"])))
    await _tool_turn(openai(server, retry))
    sent = server.requests[1].body["messages"]
    call_a, call_b = "call_a", "call_b"
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": call_a,
         "content": "a rendered\n[image: image/png, 72 B]"},
        {"role": "tool", "tool_call_id": call_b, "content": "b: text only"},
        {"role": "user", "content": [
            {"type": "text", "text": f"Returned by tool call {call_a} (snap):"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}]},
    ]


async def test_anthropic_sends_a_tools_image_inside_its_tool_result(server, retry):
    server.add(stream(_an_calls()),
               stream(anthropic_frames(["a chart and some text"])))
    await _tool_turn(anthropic(server, retry))
    results = server.requests[1].body["messages"][-1]["content"]
    assert [r["content"] for r in results] == [
        [{"type": "text", "text": "a rendered"},
         {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}],
        "b: text only"]


async def test_the_embedded_model_reads_a_tools_image_as_its_placeholder(server, retry):
    from steerable.providers.local import LocalModelProvider

    server.add(stream(_oa_calls()),
               stream(openai_frames(["I cannot see the image"])))
    await _tool_turn(LocalModelProvider(base_url=f"{server.url}/v1", environ={}, retry=retry))
    sent = server.requests[1].body["messages"]
    assert all(isinstance(m["content"], str) for m in sent)  # text only, whatever the profile
    assert "a rendered\n[image: image/png, 72 B]" in sent[-1]["content"]


_wire_parts = st.lists(st.sampled_from([TextPart("t"), ImagePart(data=PNG, media_type="image/png"),
                                        FilePart(data=PDF, media_type="application/pdf")]),
                       max_size=3)


@given(batches=st.lists(st.lists(_wire_parts, min_size=1, max_size=4), min_size=1, max_size=4))
def test_openai_tool_messages_always_follow_their_call_and_media_follow_the_batch(
        batches: list[list[list[Any]]]) -> None:
    """Whatever the tools return, the Chat Completions rule holds (every tool message right
    after the assistant message that called it, or another tool message), and each batch's
    images and files come once, in one user message after its last result."""
    from steerable.providers.openai import wire_messages as openai_wire
    from steerable.providers.profiles import DEFAULT_PROFILE

    messages: list[Message] = [Message("user", "go")]
    for b, batch in enumerate(batches):
        calls = tuple(ToolCall(f"c{b}_{i}", "snap", {}) for i in range(len(batch)))
        messages.append(Message("assistant", "", tool_calls=calls))
        messages += [Message("tool", [TextPart("r"), *parts] if parts else "r",
                             tool_call_id=c.id, name="snap") for c, parts in zip(calls, batch, strict=True)]
    wire = openai_wire(messages, DEFAULT_PROFILE)
    for i, item in enumerate(wire):
        if item["role"] == "tool":
            assert wire[i - 1]["role"] == "assistant" or wire[i - 1]["role"] == "tool"
    media_messages = [m for m in wire if m["role"] == "user" and isinstance(m["content"], list)]
    with_media = [b for b in batches if any(p for parts in b for p in parts
                                            if not isinstance(p, TextPart))]
    assert len(media_messages) == len(with_media)
    sent = sum(1 for m in media_messages for c in m["content"] if c["type"] != "text")
    assert sent == sum(1 for b in batches for parts in b for p in parts
                       if not isinstance(p, TextPart))
