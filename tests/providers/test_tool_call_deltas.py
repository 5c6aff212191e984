"""TOOL_CALL_DELTA: tool arguments streamed while the model writes them, from both HTTP
providers over their real wire formats, through the loop's secret guard, to the CLI's view."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import re
import time
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from loopback_llm import (
    LoopbackServer,
    anthropic_frames,
    openai_call_fragments,
    openai_frames,
    stream,
)

from conftest import kinds, run_turn
from steerable import EventKind, ToolCall, ToolCallDelta, TurnStatus, event_to_dict, tool
from steerable._secrets import Redactor, redacted
from steerable.cli._render import TurnView
from steerable.providers import ToolArgsDelta, ToolCallChunk
from steerable.providers._base import StreamEnd, TextDelta, guard_secrets
from steerable.providers._retry import RetryPolicy
from steerable.providers.anthropic import AnthropicProvider
from steerable.providers.openai import OpenAIProvider

written: dict[str, str] = {}


@tool(read_only=True)  # (so no approval is asked: this one only keeps what it is given)
async def write(path: str, content: str) -> str:
    """Write a file."""
    written[path] = content
    return f"wrote {len(content)} chars"


def openai(server: LoopbackServer, retry: RetryPolicy) -> OpenAIProvider:
    return OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test", model="gpt-test",
                          retry=retry, environ={})


def anthropic(server: LoopbackServer, retry: RetryPolicy) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.url, api_key="sk-ant-test", model="claude-test",
                             retry=retry, environ={})


def joined(events: list[Any], index: int) -> str:
    return "".join(e.arguments_delta for e in kinds(events, EventKind.TOOL_CALL_DELTA)
                   if e.call_index == index)


LONG = json.dumps({"path": "notes.md", "content": "".join(f"line {i}\n" for i in range(200))})


async def test_openai_streams_each_calls_arguments_before_the_call(server, retry):
    short = json.dumps({"path": "b.txt", "content": "bee"})
    first = openai_call_fragments(0, "call_a", "write", LONG, pieces=40)
    second = openai_call_fragments(1, "call_b", "write", short, pieces=3)
    fragments = [*first[:5], *second, *first[5:]]  # two calls written side by side
    server.add(stream(openai_frames(tool_fragments=fragments, finish="tool_calls")),
               stream(openai_frames(["done"])))
    result, events = await run_turn(openai(server, retry), "write them", tools=[write])

    assert result.status is TurnStatus.COMPLETED
    deltas = kinds(events, EventKind.TOOL_CALL_DELTA)
    assert all(isinstance(e, ToolCallDelta) and e.tool_name == "write" for e in deltas)
    assert len(deltas) > 10  # streamed, not one piece at the end
    # Put back together, each call's pieces are exactly what the model wrote.
    assert joined(events, 0) == LONG and joined(events, 1) == short
    first_response = kinds(events, EventKind.LLM_RESPONSE)[0]
    assert all(e.seq < first_response.seq for e in deltas)
    assert written["notes.md"].count("\n") == 200
    assert event_to_dict(deltas[0])["kind"] == "tool_call_delta"


async def test_anthropic_streams_input_json_deltas(server, retry):
    pieces = [LONG[i:i + 37] for i in range(0, len(LONG), 37)]
    server.add(stream(anthropic_frames(["Writing it."],
                                       tool_uses=[("toolu_1", "write", pieces)],
                                       stop_reason="tool_use")),
               stream(anthropic_frames(["done"])))
    result, events = await run_turn(anthropic(server, retry), "write it", tools=[write])

    assert result.status is TurnStatus.COMPLETED
    deltas = kinds(events, EventKind.TOOL_CALL_DELTA)
    # The call after a text block is still the reply's first call.
    assert {e.call_index for e in deltas} == {0} and len(deltas) > 10
    assert joined(events, 0) == LONG
    assert all(e.tool_name == "write" for e in deltas)


async def test_a_retried_reply_voids_the_pieces_it_had_sent(server, retry):
    # The first reply is cut before its end: the provider retries it from scratch, so the
    # arguments seen by an observer are the retry's (after an LLM_RETRY), never half-doubled.
    args = json.dumps({"path": "x", "content": "abc"})
    frames = openai_frames(tool_fragments=openai_call_fragments(0, "c1", "write", args),
                           finish="tool_calls", done=False, usage=None)
    server.add(stream(frames[:3], cut_after=3),
               stream(openai_frames(tool_fragments=openai_call_fragments(0, "c1", "write", args),
                                    finish="tool_calls")),
               stream(openai_frames(["ok"])))
    result, events = await run_turn(openai(server, retry), "go", tools=[write])
    assert result.status is TurnStatus.COMPLETED
    retry_seq = kinds(events, EventKind.LLM_RETRY)[0].seq
    before = [e for e in kinds(events, EventKind.TOOL_CALL_DELTA) if e.seq < retry_seq]
    after = [e for e in kinds(events, EventKind.TOOL_CALL_DELTA) if e.seq > retry_seq]
    assert before and "".join(e.arguments_delta for e in after) == args
    # The CLI forgets what the void attempt had written.
    view = TurnView(Redactor())
    for event in events:
        view.handle(event)
        if event.seq == retry_seq:
            assert not view.writing
        elif event.seq == after[-1].seq:
            assert view.writing[event.turn_id, 0].size == len(args)


SECRET = "sk-proj-Zq8VtW2yXb4nLm6kJh0gFd3s"


async def test_a_secret_split_across_argument_deltas_is_whole_in_no_output(
        server, retry, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    args = json.dumps({"path": ".env", "content": f"TOKEN={SECRET}\nother=1\n"})
    at = args.index(SECRET)
    cuts = [at + 3, at + 9, at + 20]  # the secret in four pieces on the wire
    pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
    fragments = [{"index": 0, "id": "c1", "type": "function",
                  "function": {"name": "write", "arguments": ""}}]
    fragments += [{"index": 0, "function": {"arguments": p}} for p in pieces]
    server.add(stream(openai_frames(tool_fragments=fragments, finish="tool_calls")),
               stream(openai_frames(["ok"])))
    _, events = await run_turn(openai(server, retry), "save it", tools=[write])
    deltas = kinds(events, EventKind.TOOL_CALL_DELTA)
    assert joined(events, 0) == args  # nothing lost
    # Regrouped so the secret is whole in exactly one piece, which each output blanks: cut in
    # four on the wire, it would have been whole in none, and blanked in none.
    assert sum(SECRET in e.arguments_delta for e in deltas) == 1
    redact = Redactor()
    lines = [json.dumps(redacted(event_to_dict(e), redact)) for e in deltas]
    assert all(SECRET not in line for line in lines)
    shown = "".join(json.loads(line)["arguments_delta"] for line in lines)
    assert SECRET not in shown and "[redacted]" in shown  # not even put back together


_SECRETS = st.sampled_from([SECRET, 'pass"word\\with-quotes', "correct horse battery staple",
                            "tab\there-and-there", "ünïcode-sëcret-välue"])


@settings(max_examples=150, deadline=None)
@given(secret=_SECRETS, before=st.text(max_size=20), after=st.text(max_size=20),
       cuts=st.lists(st.integers(0, 120), max_size=10), ascii_only=st.booleans())
@example(secret='pass"word\\with-quotes', before="", after="", cuts=[14, 15, 16],
         ascii_only=True)
def test_guarded_argument_pieces_never_hold_a_secret_whole(
        secret: str, before: str, after: str, cuts: list[int], ascii_only: bool) -> None:
    """Any split of a call's JSON arguments (JSON escapes the secret or not): the pieces out of
    the guard, each blanked on its own as outputs do, never hold the secret in any form it has
    in JSON text, not even put back together; unblanked, they are the arguments exactly."""
    args = json.dumps({"content": before + secret + after}, ensure_ascii=ascii_only)
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    bounds = sorted({min(c, len(args)) for c in cuts} | {0, len(args)})
    pieces = [args[a:b] for a, b in itertools.pairwise(bounds)]

    async def chunks() -> Any:
        yield TextDelta("writing ")
        for p in pieces:
            yield ToolArgsDelta(0, "write", p)
        yield ToolCallChunk(ToolCall("c1", "write", json.loads(args)))
        yield StreamEnd()

    async def guarded() -> list[Any]:
        return [c async for c in guard_secrets(chunks(), [secret])]

    out = asyncio.run(guarded())
    got = [c.text for c in out if isinstance(c, ToolArgsDelta)]
    assert "".join(got) == args
    redact = Redactor({"X_TOKEN": secret})
    shown = "".join(redact(piece) for piece in got)
    assert not any(f in shown for f in forms)
    # Held pieces come out before the whole call.
    call_at = next(i for i, c in enumerate(out) if isinstance(c, ToolCallChunk))
    assert all(i < call_at for i, c in enumerate(out) if isinstance(c, ToolArgsDelta) and c.text)


def test_the_redactor_blanks_a_secret_as_json_writes_it() -> None:
    secret = 'pass"word\\with-quotes'
    redact = Redactor({"X_TOKEN": secret})
    escaped = json.dumps({"content": secret})
    assert secret not in redact(escaped) and json.dumps(secret)[1:-1] not in redact(escaped)


async def test_the_cli_shows_a_long_write_growing(server, retry):
    first = openai_call_fragments(0, "call_a", "write", LONG, pieces=20)
    server.add(stream(openai_frames(tool_fragments=first, finish="tool_calls")),
               stream(openai_frames(["done"])))
    _, events = await run_turn(openai(server, retry), "write it", tools=[write])
    view = TurnView(Redactor())
    shown: list[str] = []
    for event in events:
        view.handle(event)
        if event.kind is EventKind.TOOL_CALL_DELTA:
            shown.append(view.toolbar())
            assert view.waiting() == ""  # not "waiting for the model" while it writes
    assert shown[0].startswith("writing write notes.md: ")
    counts = [int(m.group(1)) if (m := re.search(r"(\d+) lines?", s)) else 0 for s in shown]
    assert counts == sorted(counts) and counts[-1] == 200  # grows to the file's line count
    assert len(set(counts)) > 5 and "kB" in shown[-1]
    # Once the reply is complete the call is no longer "being written".
    assert not view.writing and "writing" not in _plain(view)


def _plain(view: TurnView) -> str:
    from rich.console import Console

    console = Console(width=120, record=True, file=io.StringIO())
    console.print(view.live())
    return console.export_text()


def test_the_live_region_has_a_line_per_call_being_written() -> None:
    view = TurnView(Redactor())
    base = {"turn_id": "t", "parent_turn_id": None, "session_id": "s", "time": time.time(),
            "iteration": 1, "tool_name": "write"}
    view.handle(ToolCallDelta(seq=1, call_index=0, arguments_delta='{"path": "a.py", "con',
                              **base))
    view.handle(ToolCallDelta(seq=2, call_index=0, arguments_delta='tent": "x\\ny\\n',
                              **base))
    view.handle(ToolCallDelta(seq=3, call_index=1, arguments_delta='{"path": "b.py"', **base))
    text = _plain(view)
    assert "writing write a.py: " in text and "2 lines" in text
    assert "writing write b.py" in text


@pytest.mark.parametrize("split", [1, 2, 5])
def test_line_count_is_right_however_an_escape_is_cut(split: int) -> None:
    view = TurnView(Redactor())
    body = '{"content": "' + "ab\\n" * 7 + '"}'
    base = {"turn_id": "t", "parent_turn_id": None, "session_id": "s", "time": 0.0,
            "iteration": 1, "tool_name": "write", "call_index": 0}
    for i in range(0, len(body), split):
        view.handle(ToolCallDelta(seq=i, arguments_delta=body[i:i + split], **base))
    assert view.writing["t", 0].lines == 7


async def test_the_files_a_run_writes_never_hold_a_split_argument_secret(
        server, retry, monkeypatch, tmp_path):
    from steerable import Agent, AgentLoop
    from steerable.replay import Recorder

    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    args = json.dumps({"path": ".env", "content": f"TOKEN={SECRET}\n"})
    at = args.index(SECRET)
    pieces = [args[:at + 2], args[at + 2:at + 11], args[at + 11:]]
    fragments = [{"index": 0, "id": "c1", "type": "function",
                  "function": {"name": "write", "arguments": ""}}]
    fragments += [{"index": 0, "function": {"arguments": p}} for p in pieces]
    server.add(stream(openai_frames(tool_fragments=fragments, finish="tool_calls")),
               stream(openai_frames(["ok"])))
    provider = openai(server, retry)
    log, recording = tmp_path / "events.jsonl", tmp_path / "run.jsonl"
    loop = AgentLoop(Agent(provider=provider, tools=[write]), record_events=log)
    async with Recorder(loop, recording):
        await loop.run_turn("save it", session_id="s")
    await loop.aclose()
    await provider.aclose()
    for path in (log, recording):
        text = path.read_text()
        assert SECRET not in text
        pieces_shown = [p for line in text.splitlines() for p in _argument_pieces(json.loads(line))]
        streamed = "".join(pieces_shown)
        assert streamed and SECRET not in streamed and "[redacted]" in streamed, path.name


def _argument_pieces(value: Any) -> list[str]:
    """The argument pieces in a line: events' ``arguments_delta``, recorded ``tool_args``."""
    if isinstance(value, list):
        return [p for v in value for p in _argument_pieces(v)]
    if not isinstance(value, dict):
        return []
    own = [value["arguments_delta"]] if value.get("kind") == "tool_call_delta" else []
    if value.get("t") == "tool_args":
        own.append(value["text"])
    return own + [p for v in value.values() for p in _argument_pieces(v)]
