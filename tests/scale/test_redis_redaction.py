"""The Redis outputs blank secrets as values too: the store's records, the checkpoints and the
event streams parse whatever the secret holds (tabs before it, quotes and backslashes in it)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from steerable import Agent, Message, Reply, ScriptedProvider, ToolCall, tool
from steerable._secrets import Redactor
from steerable.scale import LeaseTiming, RedisClient, RedisWorker
from steerable.storage import RedisSessionStore
from tests.scale._harness import ended, events_until
from tests.storage.checkpoint_contract import sample_checkpoint

SECRET = 'pa"ss\\wo\trd-0123'
OUTPUT = f"origin\thttps://user:{SECRET}@example.com/x.git (fetch)\ntoken\t{SECRET}\n"


def _clean(raw: bytes | str) -> Any:
    value = json.loads(raw)
    assert SECRET not in json.dumps(value, ensure_ascii=False) and SECRET not in str(value)
    return value


def test_the_redis_store_blanks_values_before_encoding(redis_url: str) -> None:
    redact = Redactor({"DB_PASSWORD": SECRET})
    store = RedisSessionStore(redis_url, redact=redact)
    messages = [Message("user", f"use {SECRET}"),
                Message("assistant", "", tool_calls=(ToolCall("c1", "sh", {"cmd": SECRET}),)),
                Message("tool", OUTPUT, tool_call_id="c1", name="sh")]
    store.append("s", messages, None)
    store.save_checkpoint(sample_checkpoint("s", messages=tuple(messages), input=SECRET))
    raw = store._redis.lrange(store.key("s", "msgs"), 0, -1)
    assert len(raw) == 3 and all(_clean(r) for r in raw)
    _clean(store._redis.get(store.key("s", "checkpoint")))
    assert SECRET not in store._redis.hget(store.key("s", "meta"), "title").decode()
    assert [m.role for m in store.load("s")] == ["user", "assistant", "tool"]
    assert store.load_checkpoint("s") is not None


async def test_a_workers_event_stream_blanks_values_before_encoding(redis_url: str) -> None:
    @tool
    def remote(verbose: bool) -> str:
        """git remote -v"""
        return OUTPUT

    agent = Agent(name="a", tools=[remote], provider=ScriptedProvider([
        Reply(tool_calls=[("remote", {"verbose": True})]), Reply(text=f"it is {SECRET} ok")]))
    # Given in code (extra=): remembered, so the loop cuts no delta inside it.
    redact = Redactor({}, extra=[SECRET])
    worker = RedisWorker(agent, redis_url, lease=LeaseTiming(ttl=1.0), redact=redact,
                         store=RedisSessionStore(redis_url, redact=redact))
    worker.loop.permissions.add("allow", "remote")
    client = RedisClient(redis_url)
    task = asyncio.get_running_loop().create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 10)
        await client.send("look", "s")
        events = await events_until(client, "s", ended())
        assert any(e["kind"] == "tool_exec_end" and "[redacted]" in e["content"] for e in events)
        entries = await client._redis.xrange(client.keys.events("s"))
        assert [_clean(fields[b"e"]) for _, fields in entries]
        streamed = "".join(e["text"] for e in events if e["kind"] == "llm_delta")
        assert SECRET not in streamed and "[redacted]" in streamed
    finally:
        worker.stop()
        await asyncio.wait_for(task, 20)
        await client.aclose()
