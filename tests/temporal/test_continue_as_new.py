"""A session whose workflow history grows past ``max_history`` continues as new when idle:
its conversation, its event numbering and its turns' results carry over."""

from __future__ import annotations

import asyncio

from steerable import Agent, Reply, ScriptedProvider
from steerable.temporal import workflow_id
from tests.temporal._harness import events_until, running


async def test_a_long_session_continues_as_new_and_keeps_its_history(
        temporal_target: str, events_url: str, task_queue: str) -> None:
    provider = ScriptedProvider([Reply(text=f"answer {i}") for i in range(4)])
    agent = Agent(name="long", instructions="x", provider=provider)
    sid = f"{task_queue}-long"
    async with running(agent, temporal_target, task_queue, events_url,
                       max_history=20) as client:
        handle = client.client.get_workflow_handle(workflow_id(sid))
        runs = set()
        receipts = []
        for i in range(4):
            receipt = await client.send(f"question {i}", sid)
            receipts.append(receipt)
            outcome = await client.result(sid, receipt.message_id)
            assert outcome.text == f"answer {i}"
            runs.add((await handle.describe()).run_id)
        assert len(runs) >= 2, "the workflow never continued as new"
        messages = await client.session_messages(sid)
        assert [m.content for m in messages] == [
            x for i in range(4) for x in (f"question {i}", f"answer {i}")]
        first = await client.result(sid, receipts[0].message_id)  # from an earlier run
        assert first.text == "answer 0"
        ends = 0

        def fourth_end(e: dict[str, object]) -> bool:
            nonlocal ends
            ends += e["kind"] == "turn_end"
            return ends == 4

        events = await events_until(client, sid, fourth_end)
        # One numbering across the runs (a delta carries the number of its LLM_REQUEST).
        numbers = [e["seq"] for e in events if e["kind"] != "llm_delta"]
        assert numbers == sorted(set(numbers))
        assert [e["text"] for e in events if e["kind"] == "turn_end"] == [
            f"answer {i}" for i in range(4)]


async def test_an_idle_session_closes_and_the_next_message_continues_it(
        temporal_target: str, events_url: str, task_queue: str) -> None:
    provider = ScriptedProvider([Reply(text="one"), Reply(text="two")])
    agent = Agent(name="idle", instructions="x", provider=provider)
    sid = f"{task_queue}-idle"
    async with running(agent, temporal_target, task_queue, events_url,
                       idle_close=0.5) as client:
        handle = client.client.get_workflow_handle(workflow_id(sid))
        first = await client.send("first", sid)
        assert (await client.result(sid, first.message_id)).text == "one"
        closed = await asyncio.wait_for(handle.result(), 20)  # idle 0.5 s: it completed
        assert closed is not None and [m["content"] for m in closed["history"]] == [
            "first", "one"]
        assert (await client.state(sid) or {})["busy"] is False  # read from what it kept
        assert (await client.result(sid, first.message_id)).text == "one"
        for _ in range(100):  # (visibility trails the close a moment)
            listed = [(s["messages"], s["open"]) for s in await client.list_sessions()
                      if s["id"] == sid]
            if listed == [(2, False)]:
                break
            await asyncio.sleep(0.05)
        assert listed == [(2, False)]
        second = await client.send("second", sid)  # a new run, from the state it closed with
        assert (await client.result(sid, second.message_id)).text == "two"
        assert [m.content for m in await client.session_messages(sid)] == [
            "first", "one", "second", "two"]
        assert provider.requests[1].messages[-3].content == "first"
        assert await client.delete_session(sid)
        await asyncio.wait_for(handle.result(), 20)
        assert await client.state(sid) is None  # forgotten: a new message starts afresh
        assert await client.session_messages(sid) == []


async def test_messages_sent_as_the_session_closes_are_each_taken_once(
        temporal_target: str, events_url: str, task_queue: str) -> None:
    """Sends timed around the idle close: each reaches the open run or starts the next one
    from the closed run's state; none is lost, none taken twice, the order kept."""
    rounds = 6
    provider = ScriptedProvider([Reply(text=f"r{i}") for i in range(rounds)])
    agent = Agent(name="race", instructions="x", provider=provider)
    sid = f"{task_queue}-race"
    async with running(agent, temporal_target, task_queue, events_url,
                       idle_close=0.3) as client:
        handle = client.client.get_workflow_handle(workflow_id(sid))
        runs = set()
        for i in range(rounds):
            receipt = await client.send(f"m{i}", sid)
            assert (await client.result(sid, receipt.message_id)).text == f"r{i}"
            runs.add((await handle.describe()).run_id)
            # Before, around and after the close (the server fires timers about a second
            # apart at best).
            await asyncio.sleep(0.6 + 0.35 * (i % 3))
        assert [m.content for m in await client.session_messages(sid)] == [
            x for i in range(rounds) for x in (f"m{i}", f"r{i}")]
        assert len(runs) >= 2, "no send met a closed session"


async def test_two_messages_to_a_closed_session_start_one_next_run(
        temporal_target: str, events_url: str, task_queue: str) -> None:
    provider = ScriptedProvider([Reply(text="a"), Reply(text="b"), Reply(text="c")])
    agent = Agent(name="pair", instructions="x", provider=provider)
    sid = f"{task_queue}-pair"
    async with running(agent, temporal_target, task_queue, events_url,
                       idle_close=0.3) as client:
        handle = client.client.get_workflow_handle(workflow_id(sid))
        first = await client.send("first", sid)
        await client.result(sid, first.message_id)
        await asyncio.wait_for(handle.result(), 20)
        x, y = await asyncio.gather(client.send("x", sid), client.send("y", sid))
        assert x and y and x.message_id != y.message_id
        await client.result(sid, x.message_id)
        await client.result(sid, y.message_id)
        users = [m.content for m in await client.session_messages(sid) if m.role == "user"]
        assert users[0] == "first" and sorted(users[1:]) == ["x", "y"]
