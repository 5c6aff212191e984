"""Content parts through every store and the redactor: random part lists come back whole.

Text parts are redacted like any text; the bytes of images and files come back exactly (never
"redacted": a piece of base64 that happens to look like a key must not be blanked), and the
history lines hold their hash, not the bytes. A blob that went missing is a clear error.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable import FilePart, ImagePart, Message, TextPart, TurnRecord
from steerable._secrets import Redactor, redacted
from steerable.storage import (
    JSONLSessionStore,
    MissingBlobError,
    RedisSessionStore,
    SQLiteSessionStore,
)
from steerable.storage._records import message_from_record, message_to_record
from tests._redis import RedisServer

SECRET = "hunter2-very-secret-value"
REDACT = Redactor(environ={"MY_API_KEY": SECRET})
# Bytes whose base64 spells an AWS key id: a redactor reading the base64 as text would blank it.
KEY_SHAPED = base64.b64decode("AKIAABCDEFGHIJKLMNOP" + "QRST")

texts = st.text(max_size=40) | st.just(f"the key is {SECRET}")
data = st.binary(max_size=300) | st.just(KEY_SHAPED)
parts = st.lists(st.one_of(
    st.builds(TextPart, texts),
    st.builds(lambda d, t: ImagePart(data=d, media_type=t), data,
              st.sampled_from(["image/png", "image/jpeg"])),
    st.builds(lambda u: ImagePart(url=u), st.sampled_from(["https://x.test/a.png",
                                                           f"https://x.test/{SECRET}.png"])),
    st.builds(lambda d, n: FilePart(data=d, media_type="application/pdf", name=n), data,
              st.none() | st.sampled_from(["a.pdf", "notes.txt"])),
), min_size=1, max_size=5)


def expected(message: Message) -> Message:
    """What a store gives back: every text redacted, every byte kept."""
    def part(p: Any) -> Any:
        if isinstance(p, TextPart):
            return TextPart(REDACT(p.text))
        if p.data is None:
            return ImagePart(url=REDACT(p.url))
        return p
    return Message(message.role, [part(p) for p in message.parts])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server.url
    server.stop()


@pytest.fixture(params=["jsonl", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "jsonl":
        return JSONLSessionStore(folder, redact=REDACT)
    if request.param == "sqlite":
        return SQLiteSessionStore(folder / "s.sqlite", redact=REDACT)
    return RedisSessionStore(request.getfixturevalue("redis_url"), redact=REDACT,
                             prefix=f"t{id(folder)}:")


_counter = iter(range(10**9))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts)
def test_parts_round_trip_through_every_store(store: Any, content: list[Any]) -> None:
    sid = f"s{next(_counter)}"
    messages = [Message("user", content), Message("assistant", "seen")]
    store.append(sid, messages, TurnRecord("turn_1", "completed", 1))
    assert store.load(sid) == [expected(messages[0]), messages[1]]
    # A rewrite (compaction) keeps them too, and only what it still refers to.
    store.replace(sid, messages[:1])
    assert store.load(sid) == [expected(messages[0])]


@settings(max_examples=60, deadline=None)
@given(parts)
def test_parts_round_trip_inline_through_the_redactor(content: list[Any]) -> None:
    """Checkpoints and recordings hold the bytes inline (base64): redaction must pass them."""
    message = Message("user", content)
    line = json.dumps(redacted(message_to_record(message), REDACT))
    assert message_from_record(json.loads(line), 1) == expected(message)


def test_history_lines_hold_the_hash_not_the_bytes(tmp_path: Path) -> None:
    image = bytes(range(256)) * 64
    store = JSONLSessionStore(tmp_path)
    message = Message("user", [TextPart("look"), ImagePart(data=image, media_type="image/png")])
    store.append("s", [message], TurnRecord("t", "completed", 1))
    text = (tmp_path / "s.jsonl").read_text()
    assert base64.b64encode(image).decode()[:40] not in text
    assert len(text) < 1000
    blobs = list((tmp_path / "s.blobs").iterdir())
    assert [b.read_bytes() for b in blobs] == [image]
    store.append("s", [message], TurnRecord("t2", "completed", 1))  # the same image: kept once
    assert len(list((tmp_path / "s.blobs").iterdir())) == 1
    assert store.load("s") == [message, message]
    store.delete("s")
    assert not (tmp_path / "s.blobs").exists()


def _lose_blob(store: Any, sid: str, tmp_path: Path) -> None:
    if isinstance(store, JSONLSessionStore):
        for blob in (tmp_path / "jsonl" / f"{sid}.blobs").iterdir():
            blob.unlink()
    elif isinstance(store, SQLiteSessionStore):
        with sqlite3.connect(store.path) as db:
            db.execute("DELETE FROM blobs")
    else:
        store._redis.delete(store.key(sid, "blobs"))


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "redis"])
def test_a_missing_blob_is_a_clear_error(kind: str, tmp_path: Path,
                                         request: pytest.FixtureRequest) -> None:
    if kind == "jsonl":
        store: Any = JSONLSessionStore(tmp_path / "jsonl")
    elif kind == "sqlite":
        store = SQLiteSessionStore(tmp_path / "s.sqlite")
    else:
        store = RedisSessionStore(request.getfixturevalue("redis_url"), prefix="lost:")
    message = Message("user", [ImagePart(data=b"\x89PNG...", media_type="image/png")])
    store.append("s", [message], TurnRecord("t", "completed", 1))
    _lose_blob(store, "s", tmp_path)
    with pytest.raises(MissingBlobError, match="missing from"):
        store.load("s")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_rewrite_drops_the_blobs_no_message_refers_to(kind: str, tmp_path: Path) -> None:
    store: Any = (JSONLSessionStore(tmp_path) if kind == "jsonl"
                  else SQLiteSessionStore(tmp_path / "s.sqlite"))
    old, kept = (Message("user", [ImagePart(data=bytes([n]) * 100, media_type="image/png")])
                 for n in (1, 2))
    store.append("s", [old, Message("assistant", "a"), kept], TurnRecord("t", "completed", 1))
    store.append("s", [Message("assistant", "b")], TurnRecord("t2", "completed", 1))
    # compaction dropped the first exchange; the message appended meanwhile (base) stays
    store.replace("s", [kept], base=3)

    def stored() -> set[bytes]:
        if kind == "jsonl":
            return {p.read_bytes() for p in (tmp_path / "s.blobs").iterdir()}
        with sqlite3.connect(store.path) as db:
            return {bytes(d) for (d,) in db.execute("SELECT data FROM blobs")}

    assert stored() == {bytes([2]) * 100}
    assert store.load("s") == [kept, Message("assistant", "b")]
