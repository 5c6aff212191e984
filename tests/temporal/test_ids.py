"""``steerable._ids``: ids come from the context's source, so a replay makes the same ones."""

from __future__ import annotations

import random
import types
from typing import Any

from steerable import Agent, AgentLoop, Reply, ScriptedProvider
from steerable._ids import id_source, random_hex


def _seeded(seed: int) -> random.Random:
    return random.Random(seed)


async def _ids_of_a_run(seed: int | None) -> tuple[str, str | None]:
    agent = Agent(name="a", instructions="x", provider=ScriptedProvider([Reply(text="hi")]))
    async with AgentLoop(agent) as loop:
        if seed is None:
            handle = loop.start_turn("hello", "s")
        else:
            rng = _seeded(seed)
            with id_source(lambda n: rng.getrandbits(8 * n).to_bytes(n, "big")):
                handle = loop.start_turn("hello", "s")
        await handle
        return handle.turn_id, handle.message_id


async def test_a_seeded_source_makes_the_same_ids_again() -> None:
    assert await _ids_of_a_run(7) == await _ids_of_a_run(7)
    assert await _ids_of_a_run(7) != await _ids_of_a_run(8)


async def test_without_a_source_ids_are_random() -> None:
    assert await _ids_of_a_run(None) != await _ids_of_a_run(None)
    assert len(random_hex(16)) == 32 and random_hex(16) != random_hex(16)


def test_an_updates_ids_depend_on_the_run_and_the_update_alone() -> None:
    from steerable.temporal._workflow import update_ids  # (needs temporalio)

    first, again = update_ids("run-1", "upd-a"), update_ids("run-1", "upd-a")
    drawn = first(5) + first(40) + first(3)
    assert drawn == again(48)  # however it is drawn, the same stream
    assert update_ids("run-1", "upd-a")(48) == drawn  # in another process too: no hash()
    assert update_ids("run-1", "upd-b")(48) != drawn
    assert update_ids("run-2", "upd-a")(48) != drawn
    with id_source(update_ids("run-1", "upd-a")):
        ids = [random_hex(12) for _ in range(3)]
    assert ids == [drawn[i:i + 12].hex() for i in (0, 12, 24)]


def test_a_block_closed_from_another_context_leaves_that_context_alone() -> None:
    """A workflow dropped from a stopped worker's cache leaves coroutines suspended inside
    ``id_source`` (``test_eviction``: the worker now evicts them); the garbage collector
    closes them later, in whatever context is current then (another workflow's task): that
    context keeps its own source."""
    import contextvars

    mine = random.Random(1)
    theirs = random.Random(2)

    def source_of(rng: random.Random) -> Any:
        return lambda n: rng.getrandbits(8 * n).to_bytes(n, "big")

    @types.coroutine
    def pause() -> Any:
        yield

    async def suspended() -> None:
        with id_source(source_of(mine)):
            await pause()

    evicted = suspended()
    contextvars.copy_context().run(evicted.send, None)  # entered the block in its own context

    other = source_of(theirs)
    with id_source(other):
        before = random_hex(4)
        evicted.close()  # GeneratorExit here: its finally runs in this context
        after = random_hex(4)
    expect = random.Random(2)
    assert [before, after] == [expect.getrandbits(32).to_bytes(4, "big").hex(),
                               expect.getrandbits(32).to_bytes(4, "big").hex()]
