"""The event bus: fan-out, filters, bounded buffers and drop counts, close semantics."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading

import pytest

from steerable import Event, EventKind, Reply, TurnStatus, event_to_dict
from steerable._events import EVENT_CLASSES
from tests.conftest import make_loop, of

K = EventKind


def test_one_frozen_class_per_kind_with_common_fields() -> None:
    assert set(EVENT_CLASSES) == set(EventKind)
    for kind, cls in EVENT_CLASSES.items():
        assert cls.kind is kind
        names = {f.name for f in dataclasses.fields(cls)}
        assert {"turn_id", "parent_turn_id", "session_id", "seq", "time"} <= names
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert hasattr(cls, "__slots__")


async def test_filtered_subscription_and_strict_seq() -> None:
    loop, _, everything = make_loop([Reply(text="a b c")])
    only = loop.subscribe(kinds=[K.TURN_START, K.TURN_END])
    await loop.run_turn("go", session_id="s")
    assert [e.kind for e in only.drain_nowait()] == [K.TURN_START, K.TURN_END]
    seqs = [e.seq for e in everything.drain_nowait()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_subscriber_that_never_reads_drops_and_counts() -> None:
    loop, _, _ = make_loop([Reply(text="one two three four five six")])
    tiny = loop.subscribe(buffer=2)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert [e.kind for e in tiny.drain_nowait()] == [K.TURN_START, K.MESSAGE_STATE]
    assert tiny.dropped[K.LLM_DELTA] == 6 and tiny.dropped[K.TURN_END] == 1
    stats = loop.statistics()
    assert stats.dropped[K.LLM_DELTA] == 6
    assert stats.events_emitted >= 12


async def test_close_ends_iteration_after_buffered_events() -> None:
    loop, _, sub = make_loop([Reply(text="hi")])
    await loop.run_turn("go", session_id="s")
    buffered = len(sub)
    sub.close()
    sub.close()  # idempotent
    got = [e async for e in sub]
    assert len(got) == buffered and got[-1].kind is K.TURN_END


async def test_close_wakes_a_waiting_reader_and_works_from_another_thread() -> None:
    loop, _, sub = make_loop([Reply(text="hi")])
    await loop.run_turn("go", session_id="s")
    sub.drain_nowait()

    async def read() -> list:
        return [e async for e in sub]

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)  # one step: the reader is now blocked on the empty buffer
    assert not reader.done()
    await asyncio.to_thread(sub.close)
    assert await asyncio.wait_for(reader, 1) == []


async def test_loop_close_ends_every_subscription() -> None:
    loop, _, sub = make_loop([Reply(text="hi")])
    await loop.run_turn("go", session_id="s")
    await loop.aclose()
    assert sub.closed and [e async for e in sub][-1].kind is K.TURN_END
    with pytest.raises(RuntimeError, match="closed"):
        loop.start_turn("again")


def test_subscribe_validates() -> None:
    loop, _, _ = make_loop([])
    with pytest.raises(ValueError):
        loop.subscribe(buffer=0)
    with pytest.raises(ValueError, match="unknown event kind"):
        loop.subscribe(kinds=["nonsense"])  # type: ignore[list-item]
    assert loop.subscribe(kinds=K.TURN_END).kinds == frozenset({K.TURN_END})


async def test_event_to_dict_is_json() -> None:
    loop, _, sub = make_loop([Reply(text="hi", tool_calls=[("nope", {"a": [1, 2]})]), Reply(text="ok")])
    await loop.run_turn("go", session_id="s")
    for event in sub.drain_nowait():
        d = event_to_dict(event)
        assert d["kind"] == event.kind.value and d["seq"] == event.seq
        assert {"turn_id", "parent_turn_id", "session_id", "time"} <= d.keys()
        json.dumps(d)


async def test_recorder_writes_every_event_as_json_lines(tmp_path) -> None:
    from steerable import Agent, AgentLoop, ScriptedProvider

    path = tmp_path / "events.jsonl"
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="hello world")])), record_events=path)
    sub = loop.subscribe()
    await loop.run_turn("go", session_id="s")
    await loop.aclose()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["seq"] for line in lines] == [e.seq for e in sub.drain_nowait()]
    assert lines[0]["kind"] == "turn_start" and lines[-1]["kind"] == "turn_end"
    assert lines[-1]["status"] == "completed"


async def test_recorder_opt_in_by_environment(tmp_path, monkeypatch) -> None:
    from steerable import Agent, AgentLoop, ScriptedProvider

    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("STEERABLE_EVENT_LOG", str(path))
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="x")])))
    await loop.run_turn("go", session_id="s")
    await loop.aclose()
    assert path.read_text().count("\n") >= 5


async def test_emit_from_threads_is_marshalled() -> None:
    """Subscribing from another thread while turns run does not corrupt the bus."""
    loop, _, _ = make_loop([Reply(text="x", delay=0.05)])
    handle = loop.start_turn("go", session_id="s")
    subs = []
    threads = [threading.Thread(target=lambda: subs.append(loop.subscribe())) for _ in range(4)]
    for t in threads:
        t.start()
    await asyncio.to_thread(lambda: [t.join() for t in threads])
    await handle
    assert all(of(s.drain_nowait(), K.TURN_END) for s in subs)


async def test_a_second_reader_of_one_subscription_is_refused() -> None:
    # Two tasks reading one subscription would each get some of the events: a silent split.
    loop, _, _ = make_loop([Reply(text="hi")])
    sub = loop.subscribe(kinds=[K.TURN_END])
    first = asyncio.ensure_future(sub.__anext__())
    await asyncio.sleep(0)  # the first reader is now waiting
    with pytest.raises(RuntimeError, match="already iterating"):
        await sub.__anext__()
    await loop.run_turn("go", session_id="s")
    assert (await asyncio.wait_for(first, 5)).kind is K.TURN_END  # the first reader still works
    sub.close()
    await loop.aclose()


async def test_an_observer_sees_every_event_of_its_kinds_in_order_as_emitted() -> None:
    from steerable import Agent, AgentLoop, Reply, ScriptedProvider

    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="a b")] * 2)))
    sub = loop.subscribe(buffer=10_000)
    seen: list[int] = []
    ends: list[int] = []
    observer = loop.observe(lambda e: seen.append(e.seq))
    loop.observe(lambda e: ends.append(e.seq), kinds=EventKind.TURN_END)
    await loop.run_turn("go", "s")
    assert seen and seen == [e.seq for e in sub.drain_nowait()]
    assert len(ends) == 1 and ends[0] == seen[-1]
    assert loop.statistics().subscribers == 3
    observer.close()
    observer.close()  # idempotent
    await loop.run_turn("go", "s")
    assert len(ends) == 2 and seen[-1] < ends[-1]  # the closed one heard nothing more
    await loop.aclose()


async def test_an_observer_that_raises_is_detached_and_the_turn_goes_on() -> None:
    from steerable import Agent, AgentLoop, Reply, ScriptedProvider

    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="a")] * 2)))
    calls: list[EventKind] = []

    def broken(event: Event) -> None:
        calls.append(event.kind)
        raise ValueError("observer bug")

    observer = loop.observe(broken)
    result = await loop.run_turn("go", "s")
    assert result.status.value == "completed" and len(calls) == 1
    assert observer.closed and isinstance(observer.error, ValueError)
    await loop.run_turn("go", "s")
    assert len(calls) == 1
    await loop.aclose()
