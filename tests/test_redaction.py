"""Secrets are blanked as values before anything is encoded, and streamed text is never cut
inside one: for any secret, any text around it, any JSON shape and any split into deltas, every
output parses and holds the secret whole nowhere (property tests with hypothesis)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from steerable import Agent, AgentLoop, EventKind, TurnPhase, TurnStatus, tool
from steerable._secrets import Redactor, StreamGuard, redacted, redacted_json
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    guard_secrets,
)
from steerable.storage import JSONLSessionStore, SQLiteSessionStore
from tests.storage.checkpoint_contract import sample_checkpoint

# Any character a value can hold: controls, quotes, backslashes, line and paragraph
# separators, astral planes (surrogates cannot be encoded, so no output can hold one).
ANY_CHAR = st.characters(exclude_categories=("Cs",))
SECRETS = st.text(ANY_CHAR, min_size=8, max_size=24)
TEXT = st.text(ANY_CHAR, max_size=40)
ENV = "PROBE_SECRET_TOKEN"

# Strings the outputs hold whatever the secret is: a secret inside one of them is there anyway.
_VOCAB = " ".join([*(k.value for k in EventKind), *(s.value for s in TurnStatus),
                   *(p.value for p in TurnPhase), "[redacted]", "assistant", "system"])


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def assert_clean(line: str, secret: str, where: str) -> None:
    """``line`` is valid JSON, and no string in it (keys included) holds ``secret``."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise AssertionError(f"{where}: a line that does not parse ({exc}): {line[:200]!r}") \
            from None
    for leaf in _leaves(value):
        assert secret not in leaf, f"{where}: the secret is whole in {leaf[:200]!r}"


def _split(text: str, cuts: Sequence[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


# -- the mechanism: values, then streams ----------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12)


@settings(max_examples=600, deadline=None)
@given(secret=SECRETS, value=JSON_VALUES, before=TEXT, after=TEXT, as_key=st.booleans())
@example(secret="hunter2\thunter2", value={"out": "x"}, before="origin\t", after="\n",
         as_key=False)
@example(secret='a"b\\c"d\\"', value=["x"], before="\\", after='"', as_key=True)
def test_a_redacted_value_encodes_to_json_without_the_secret(
        secret: str, value: Any, before: str, after: str, as_key: bool) -> None:
    assume(secret not in _VOCAB)
    redactor = Redactor({ENV: secret})
    carrier = before + secret + after
    document = {carrier: value} if as_key else {"value": value, "text": carrier,
                                                "list": [carrier, (carrier,)]}
    for encode in (lambda v: json.dumps(v, ensure_ascii=False),
                   lambda v: json.dumps(v), lambda v: json.dumps(v, indent=1)):
        assert_clean(encode(redacted(document, redactor)), secret, "redacted value")


# Shaped like credentials, so the fast path of ``redacted_json`` meets its marks and shapes.
SHAPED = st.sampled_from(["sk-", "ghp_", "github_pat_", "glpat-", "xoxb-", "AKIA", "AIza", "hf_",
                          "npm_", "eyJ", "-----BEGIN RSA PRIVATE KEY-----", "https://u:", "@",
                          "gh", "://"])
SHAPED_TEXT = st.lists(st.one_of(SHAPED, TEXT, st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                                                       min_size=10, max_size=40)),
                       max_size=5).map("".join)
SHAPED_VALUES = st.recursive(
    st.none() | st.integers() | SHAPED_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SHAPED_TEXT, inner, max_size=4),
    max_leaves=12)


@settings(max_examples=800, deadline=None)
@given(secret=SECRETS, value=SHAPED_VALUES, where=st.sampled_from(["none", "value", "key"]))
def test_encoding_first_and_walking_only_when_needed_gives_the_same_text(
        secret: str, value: Any, where: str) -> None:
    redactor = Redactor({ENV: secret})
    if where == "value":
        value = [value, "x" + secret + "y"]
    elif where == "key":
        value = {secret: value}
    assert redacted_json(value, redactor) == json.dumps(redacted(value, redactor),
                                                        ensure_ascii=False)


@settings(max_examples=1500, deadline=None)
@given(secret=SECRETS, before=TEXT, after=TEXT, cuts=st.lists(st.integers(0, 200), max_size=12))
@example(secret="correct horse battery", before="my password is correct ", after=" ok",
         cuts=[20, 25, 31, 40])
@example(secret="sk-proj-AAAAAAAAAAAAAAAAAAAA", before="key ", after="", cuts=[5, 9, 12])
def test_a_secret_streamed_in_any_pieces_is_whole_in_none_and_nothing_is_lost(
        secret: str, before: str, after: str, cuts: list[int]) -> None:
    assume(secret not in _VOCAB)
    text = before + secret + after
    redactor = Redactor({ENV: secret})
    guard = redactor.guard()
    released = [guard.feed(piece) for piece in _split(text, cuts)]
    released.append(guard.flush())
    assert "".join(released) == text  # regrouped, never changed
    shown = [redactor(piece) for piece in released]
    for piece in shown:
        assert_clean(json.dumps({"text": piece}), secret, "delta")
    assert secret not in "".join(shown)  # not even when every delta is put back together


class Pieces:
    """A provider that streams each reply in the given pieces (a tool call first, if any)."""

    def __init__(self, replies: Sequence[tuple[Sequence[str], dict[str, Any] | None]]) -> None:
        self.replies = list(replies)

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        pieces, call = self.replies.pop(0)
        for piece in pieces:
            yield TextDelta(piece)
            await asyncio.sleep(0)
        if call is not None:
            from steerable import ToolCall

            yield ToolCallChunk(ToolCall("call_1", "remote", call))
        yield StreamEnd(None, "stop")

    async def aclose(self) -> None:
        return None


async def test_the_loop_reads_every_provider_through_the_guard() -> None:
    async def stream() -> AsyncIterator[Chunk]:
        for piece in ["tok: abcd", "efgh1234", "5678 done"]:
            yield TextDelta(piece)
        yield StreamEnd(None, "stop")

    out = [c.text async for c in guard_secrets(stream(), ["abcdefgh12345678"])
           if isinstance(c, TextDelta)]
    # A piece held whole still yields an empty delta: the idle watchdog sees the provider alive.
    assert out == ["tok: ", "", "abcdefgh12345678 ", "done"]
    agent = Agent(name="a", provider=Pieces([(["tok: abcd", "efgh1234", "5678 done"], None)]))
    loop = AgentLoop(agent)
    sub = loop.subscribe([EventKind.LLM_DELTA])
    with _env(ENV, "abcdefgh12345678"):
        await loop.run_turn("go", session_id="s")
    await loop.aclose()
    assert [e.text for e in sub.drain_nowait()] == ["tok: ", "abcdefgh12345678 ", "done"]


class _Unended:
    """Streams reasoning then text, each split inside the secret, and no ``StreamEnd``."""

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        yield ThinkingDelta("think abcd")
        yield ThinkingDelta("efgh12345678 ok")
        for piece in ["tok: abcd", "efgh1234", "5678"]:
            yield TextDelta(piece)

    async def aclose(self) -> None:
        return None


async def test_the_loop_guards_reasoning_and_flushes_a_stream_that_ends_without_its_end() -> None:
    # The model call applies the guard itself (``SecretGuard``): what it holds when the
    # reasoning turns into text, and at a stream's end with no StreamEnd, still comes out.
    loop = AgentLoop(Agent(name="a", provider=_Unended()))
    sub = loop.subscribe([EventKind.LLM_DELTA])
    with _env(ENV, "abcdefgh12345678"):
        result = await loop.run_turn("go", session_id="s")
    await loop.aclose()
    assert result.error is None, result.error
    deltas = [(e.thinking, e.text) for e in sub.drain_nowait()]
    # "ok" is held until the text begins; the last piece until the stream's end.
    assert deltas == [(True, "think "), (True, "abcdefgh12345678 "), (True, "ok"),
                      (False, "tok: "), (False, "abcdefgh12345678")]
    assert result.text == "tok: abcdefgh12345678"


# -- every output of a real run ------------------------------------------------------------------

@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


async def _run_everything(root: Path, secret: str, pieces: list[str], output: str,
                          record: bool) -> list[tuple[str, str]]:
    """One turn (a tool call whose output holds the secret, then a streamed answer in
    ``pieces``) through every output; returns (output name, line) pairs. ``record``: under a
    ``Recorder`` (which reads the provider itself, so the loop's own guard is not used)."""
    from steerable.cli._render import event_json
    from steerable.replay import Recorder, replay
    from steerable.server import EventHub, LocalRunner

    @tool
    def remote(verbose: bool) -> str:
        """git remote -v"""
        return output

    redactor = Redactor()
    store = JSONLSessionStore(root / "sessions", redact=redactor)
    agent = Agent(name="coder", tools=[remote], provider=Pieces(
        [(["Let me look."], {"verbose": True}), (pieces, None)]))
    loop = AgentLoop(agent, store=store, record_events=root / "debug.jsonl")
    hub = EventHub(redactor)
    printed: list[str] = []

    async def pump() -> None:
        async for event in loop.subscribe():
            hub.publish(event)
            printed.append(event_json(event, redactor))  # run --json

    pumping = asyncio.get_running_loop().create_task(pump())
    if record:
        async with Recorder(loop, root / "run.jsonl", redact=redactor):
            await loop.run_turn(f"check {secret} please", session_id="s")
    else:
        await loop.run_turn(f"check {secret} please", session_id="s")
    runner = LocalRunner(loop, redactor)
    api = [json.dumps(await runner.get_session("s"), ensure_ascii=False),
           json.dumps(await runner.list_sessions(), ensure_ascii=False)]
    messages = loop.session_messages("s")
    await loop.aclose()
    await pumping
    store.save_checkpoint(sample_checkpoint("s", messages=tuple(messages), input=secret))
    sqlite = SQLiteSessionStore(root / "s.db", redact=redactor)
    sqlite.append("s", messages, None)
    sqlite.save_checkpoint(sample_checkpoint("s", messages=tuple(messages)))
    with sqlite3.connect(root / "s.db") as db:
        rows = [r[0] for r in db.execute("SELECT record FROM messages UNION ALL "
                                         "SELECT record FROM checkpoints")]
        rows += [json.dumps(r[0]) for r in db.execute("SELECT title FROM sessions")]
    if record:
        await replay(root / "run.jsonl")  # the blanked recording still replays
    assert store.load("s")  # and the session loads
    names = ["sessions/s.jsonl", "sessions/s.checkpoint", "debug.jsonl"]
    files = {name: (root / name).read_text().rstrip("\n").split("\n")
             for name in names + ["run.jsonl"] * record}
    return ([(name, line) for name, lines in files.items() for line in lines]
            + [("--json", line) for line in printed]
            + [("sse", data) for _, data in hub._channels["s"].ring]
            + [("api", line) for line in api] + [("sqlite", row) for row in rows])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=SECRETS, before=TEXT, after=TEXT, cuts=st.lists(st.integers(0, 120), max_size=8),
       prefix=st.sampled_from(["", "\t", "\n", "\\", '"', "\\t"]), record=st.booleans())
@example(secret="ghp_0123456789abcdefghij0123", before="", after="", cuts=[3, 9],
         prefix="\t", record=True)
@example(secret="pass word 123", before="a ", after="", cuts=[4, 8], prefix="", record=False)
def test_every_output_of_a_run_parses_and_never_holds_the_secret(
        secret: str, before: str, after: str, cuts: list[int], prefix: str, record: bool) -> None:
    assume(secret not in _VOCAB and not re.fullmatch(r"[0-9a-z_]*", secret))
    assume("\x00" not in secret)  # an environment value cannot hold a NUL
    # The output of `git remote -v`: a credential URL right after an escaped tab.
    output = (f"origin{prefix}https://user:{secret}@example.com/x.git (fetch)\n"
              f"token{prefix}{secret}\n")
    pieces = _split(before + secret + after, cuts)
    with _env(ENV, secret), tempfile.TemporaryDirectory() as tmp:
        lines = asyncio.run(_run_everything(Path(tmp), secret, pieces, output, record))
    assert {name for name, _ in lines} >= {"sessions/s.jsonl", "sessions/s.checkpoint",
                                           "debug.jsonl", "--json", "sse", "api", "sqlite",
                                           *["run.jsonl"] * record}
    streamed: dict[str, str] = {}
    for name, line in lines:
        assert_clean(line, secret, name)
        streamed[name] = streamed.get(name, "") + "".join(_streamed(json.loads(line)))
    for name, text in streamed.items():  # the pieces of a stream, put back together
        assert secret not in text, f"{name}: the secret can be rebuilt from its deltas"


def _streamed(value: Any) -> Iterator[str]:
    """The streamed pieces of text in one output line: an LLM_DELTA event (as printed, or
    inside a recording's event entry), or a recorded provider chunk."""
    if not isinstance(value, dict):
        return
    if value.get("kind") == "llm_delta":
        yield str(value["text"])
    elif value.get("type") == "event":
        yield from _streamed(value["event"])
    elif value.get("type") == "llm":
        yield from (str(c["text"]) for c in value["chunks"] if c.get("t") == "text")


def test_blanking_cannot_spell_the_secret_anew() -> None:
    secret = "d]abcdefg"  # "[redacted]" followed by "abcdefg" would hold it again
    redactor = Redactor({ENV: secret})
    assert secret not in redactor(f"x{secret}abcdefg")
    assert StreamGuard([secret]).feed("abc") == ""  # a word is held until it ends
