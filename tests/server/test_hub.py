"""The SSE fan-out: bounded replay, slow clients drop (counted) without slowing anyone,
sub-turn events routed to their top-level session."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable import Agent, AgentLoop, Reply, ScriptedProvider
from steerable._events import LLMDelta, TurnEnd, TurnStatus
from steerable.server import EventHub


async def test_slow_client_drops_are_counted_and_never_block_the_turn() -> None:
    hub = EventHub(lambda t: t.replace("sk-secret-value", "[redacted]"), replay=8)
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider(
        [Reply(text="sk-secret-value " + "word " * 200)])))
    pump = asyncio.ensure_future(hub.pump(loop.subscribe(buffer=100_000)))
    slow = hub.attach("s", None, buffer=4)  # never read
    fast = hub.attach("s", None)
    got: list[int] = []

    async def read() -> None:
        async for seq, data in hub.stream(fast):
            got.append(seq)
            if json.loads(data)["kind"] == "turn_end":
                return

    reader = asyncio.ensure_future(read())
    result = await asyncio.wait_for(loop.run_turn("go", "s"), 10)
    await asyncio.wait_for(reader, 10)
    assert result.status.value == "completed"
    assert slow.dropped > 0 and hub.dropped == slow.dropped and fast.dropped == 0
    assert got == list(range(got[0], got[-1] + 1))  # the reader that kept up lost nothing
    # the replay buffer is bounded: a late client gets the last 8 events only
    late = hub.attach("s", 0)
    replayed = late.take()
    assert len(replayed) == 8 and replayed[-1][0] == got[-1]
    assert all("sk-secret-value" not in data for _, data in replayed)
    hub.detach(slow)
    hub.detach(late)
    await loop.aclose()
    await pump
    assert hub.client_count() == 0


async def test_sub_turn_events_go_to_the_top_level_session() -> None:
    child = Agent(name="helper", instructions="help", description="helps",
                  provider=ScriptedProvider([Reply(text="child says hi")]))
    parent = Agent(name="main", subagents=[child], provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "helper", "task": "say hi"})]),
        Reply(text="done")]))
    loop = AgentLoop(parent)
    hub = EventHub(lambda t: t)
    pump = asyncio.ensure_future(hub.pump(loop.subscribe(buffer=100_000)))
    await loop.run_turn("go", "top")
    await loop.aclose()
    await pump
    client = hub.attach("top", 0)
    events = [json.loads(data) for _, data in client.take()]
    child_events = [e for e in events if e["parent_turn_id"] is not None]
    assert child_events and any(e["kind"] == "llm_delta" for e in child_events)
    assert {e["kind"] for e in events} >= {"subturn_spawn", "subturn_end"}


# The fan-out as a mechanism: any interleaving of publishes, attaches (live or from a
# Last-Event-ID), reads (as items or as the SSE wire) and detaches, against a model where each client had its own queue.
_OPS = st.lists(st.one_of(
    st.tuples(st.just("publish"), st.integers(1, 40)),
    st.tuples(st.just("attach"), st.one_of(st.none(), st.integers(0, 200)), st.integers(1, 12)),
    st.tuples(st.just("take"), st.integers(0, 7)),
    st.tuples(st.just("take_sse"), st.integers(0, 7)),  # the wire, made once per range
    st.tuples(st.just("detach"), st.integers(0, 7)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(_OPS, st.integers(1, 16))
def test_every_client_gets_an_ordered_gapless_tail_and_every_loss_is_counted(
        ops: list[tuple[Any, ...]], replay: int) -> None:
    hub = EventHub(lambda t: t, replay=replay, client_buffer=12)
    seq = 0
    published: list[int] = []
    clients: list[tuple[Any, list[int], int]] = []  # (client, seqs received, first expected index)
    for op in ops:
        if op[0] == "publish":
            for _ in range(op[1]):
                seq += 1
                hub.publish(LLMDelta(turn_id="t", parent_turn_id=None, session_id="s", seq=seq,
                                     time=0.0, iteration=1, text=str(seq)))
                published.append(seq)
        elif op[0] == "attach":
            after, buffer = op[1], op[2]
            client = hub.attach("s", after, buffer)
            if after is None:
                first = len(published)
            else:  # the events after `after` that the replay window still holds
                window = max(0, len(published) - replay)
                first = next((i for i in range(window, len(published)) if published[i] > after),
                             len(published))
            clients.append((client, [], first))
        elif clients:
            client, got, _ = clients[op[1] % len(clients)]
            if op[0] == "take":
                got += [s for s, _ in client.take()]
            elif op[0] == "take_sse":
                got += [int(line[4:]) for line in client.take_sse().split(b"\r\n")
                        if line.startswith(b"id: ")]
            else:
                hub.detach(client)
    for client, got, first in clients:
        if client.attached:
            got += [s for s, _ in client.take()]
        expected = published[first:]
        # what it got is in order and from what it should get; what it lost is counted, and
        # once it has read everything, got + lost is all of it
        assert got == sorted(set(got)) and set(got) <= set(expected)
        if client.attached:
            assert client.dropped == len(expected) - len(got)
        else:
            assert client.dropped <= len(expected) - len(got)
    live = [c for c, _, _ in clients if c.attached]
    assert hub.client_count() == len(live)
    assert hub.dropped == sum(c.dropped for c, _, _ in clients)


async def test_sse_bytes_are_what_sse_starlette_writes_and_made_once_per_range() -> None:
    from sse_starlette.event import ensure_bytes

    hub = EventHub(lambda t: t)
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="a b c")])))
    pump = asyncio.ensure_future(hub.pump(loop.subscribe(buffer=100_000)))
    first, second = hub.attach("s", None), hub.attach("s", None)
    check = hub.attach("s", None)
    await loop.run_turn("go", "s")
    await loop.aclose()
    await pump
    wire = first.take_sse()
    assert second.take_sse() is wire  # encoded once for both
    expected = b"".join(ensure_bytes({"id": str(seq), "data": data}, "\r\n")
                        for seq, data in check.take())
    assert wire == expected and wire.count(b"\r\n\r\n") > 3
    assert first.take_sse() == b""  # nothing new since


async def test_frames_yield_each_wake_up_as_one_piece() -> None:
    hub = EventHub(lambda t: t)
    client = hub.attach("s", None)
    frames = hub.frames(client)
    reader = asyncio.ensure_future(frames.__anext__())
    await asyncio.sleep(0)
    for seq in (1, 2, 3):
        hub.publish(LLMDelta(turn_id="t", parent_turn_id=None, session_id="s", seq=seq,
                             time=0.0, iteration=1, text=str(seq)))
    piece = await asyncio.wait_for(reader, 5)
    assert [line for line in piece.split(b"\r\n") if line.startswith(b"id:")] == \
        [b"id: 1", b"id: 2", b"id: 3"]
    await frames.aclose()
    assert hub.client_count() == 0


async def test_a_burst_waits_for_the_flush_and_a_turn_end_wakes_at_once() -> None:
    # A flush of an hour: an event that waits for it is never delivered within this test.
    hub = EventHub(lambda t: t, flush=3600.0)
    frames = hub.frames(hub.attach("s", None))

    def delta(seq: int) -> LLMDelta:
        return LLMDelta(turn_id="t", parent_turn_id=None, session_id="s", seq=seq, time=0.0,
                        iteration=1, text=str(seq))

    def ids(piece: bytes) -> list[bytes]:
        return [line for line in piece.split(b"\r\n") if line.startswith(b"id:")]

    reader = asyncio.ensure_future(frames.__anext__())
    await asyncio.sleep(0)
    hub.publish(delta(1))  # the first after a quiet spell: at the next loop cycle
    assert ids(await asyncio.wait_for(reader, 5)) == [b"id: 1"]
    reader = asyncio.ensure_future(frames.__anext__())
    await asyncio.sleep(0)  # waiting now (a reader that is not takes what the ring holds)
    hub.publish(delta(2))  # in the burst: waits for the flush
    for _ in range(5):
        await asyncio.sleep(0)
    assert not reader.done()
    hub.publish(TurnEnd(turn_id="t", parent_turn_id=None, session_id="s", seq=3, time=0.0,
                        status=TurnStatus.COMPLETED, text="", iterations=1))
    assert ids(await asyncio.wait_for(reader, 5)) == [b"id: 2", b"id: 3"]
    await frames.aclose()


async def test_an_event_in_a_burst_arrives_within_the_flush() -> None:
    hub = EventHub(lambda t: t, flush=0.05)
    frames = hub.frames(hub.attach("s", None))
    for seq in (1, 2):
        reader = asyncio.ensure_future(frames.__anext__())
        await asyncio.sleep(0)
        hub.publish(LLMDelta(turn_id="t", parent_turn_id=None, session_id="s", seq=seq,
                             time=0.0, iteration=1, text="x"))
        assert f"id: {seq}\r\n".encode() in await asyncio.wait_for(reader, 5)
    await frames.aclose()


async def test_the_runner_feeds_its_hub_as_an_observer_and_every_client_gets_every_event_in_order(
) -> None:
    from steerable.server._runner import LocalRunner

    replies = [Reply(text="one two three"), Reply(text="four five"), Reply(text="six")]
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider(replies)))
    runner = LocalRunner(loop)
    await runner.start()
    everything = loop.subscribe(buffer=100_000)  # what a subscription sees, to compare
    clients = [runner.hub.attach("s", None) for _ in range(5)]
    got: list[list[int]] = [[] for _ in clients]

    async def read(i: int) -> None:
        async for seq, _ in runner.hub.stream(clients[i]):
            got[i].append(seq)

    readers = [asyncio.ensure_future(read(i)) for i in range(len(clients))]
    for _ in replies:
        await loop.run_turn("go", "s")
    # No task reads a subscription for the hub: its state is current as each event is emitted.
    expected = [e.seq for e in everything.drain_nowait() if e.session_id == "s"]
    assert runner.hub.cursor("s") == expected[-1]
    # Until every reader has caught up (a bound only against a hang: a loaded machine may
    # take a while to run 100 readers).
    for _ in range(30_000):
        if all(len(g) == len(expected) for g in got):
            break
        await asyncio.sleep(0.001)
    for reader in readers:
        reader.cancel()
    assert expected and all(g == expected for g in got)  # every event, in order, no gap
    await runner.aclose()


async def test_a_failing_hub_is_detached_without_breaking_the_turn_and_raised_at_close() -> None:
    from steerable.server._runner import LocalRunner

    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider([Reply(text="a")])))
    runner = LocalRunner(loop)

    def broken(text: str) -> str:
        raise RuntimeError("redaction bug")

    runner.hub = EventHub(broken)
    await runner.start()
    result = await loop.run_turn("go", "s")
    assert result.status.value == "completed"
    try:
        await runner.aclose()
    except RuntimeError as exc:
        assert "redaction bug" in str(exc)
    else:
        raise AssertionError("the hub's failure was not reported")
