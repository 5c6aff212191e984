"""The protocol front ends on ``steerable serve --redis``: the front process follows the turn
while a worker (here the same process, as one worker of the group) runs it. A2A: an approval
and a steer travel through Redis. AG-UI: a second run of a thread follows its own turn, not the
first one still in the session's event stream. MCP: ``run`` returns when its turn ends."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client", reason="the a2a extra is not installed")

from tests.protocols._a2a_client import DONE, IR, Background, W, peer, states, task_id, texts
from tests.protocols._serving import served  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(120)


async def test_an_approval_and_a_steer_through_redis(served: Any,  # noqa: F811
                                                     redis_url: str) -> None:
    url = served([{"tool_calls": [["write", {"path": "b.txt", "content": "new"}]]},
                  {"text": "written"},
                  {"tool_calls": [["read", {"path": "a.txt"}]], "delay": 1.0},
                  {"text": "read, briefly"}], extra_env={"STEERABLE_REDIS_URL": redis_url})
    async with peer(url) as a2a:
        asked = await a2a.send("write it", context="r1")
        assert states(asked)[-1] == IR
        answered = await a2a.send("yes", context="r1", task=task_id(asked))
        assert states(answered) == [W, DONE]
        running = Background(a2a, "read a.txt", context="r1")
        tid = await running.working()
        [steered] = await a2a.send("be brief", context="r1", task=tid, stream=False)
        assert steered.task.id == tid
        got = await running.done
    assert "steered: be brief" in texts(got) and states(got)[-1] == DONE


async def test_each_agui_run_follows_its_own_turn(served: Any,  # noqa: F811
                                                  redis_url: str) -> None:
    url = served([{"text": "one"}, {"text": "two"}],
                 extra_env={"STEERABLE_REDIS_URL": redis_url})
    results = []
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        for text in ("first", "second"):
            body = {"threadId": "g1", "runId": str(uuid.uuid4()), "state": {}, "tools": [],
                    "context": [], "forwardedProps": {},
                    "messages": [{"id": "u", "role": "user", "content": text}]}
            async with client.stream("POST", "/v1/agui", json=body) as response:
                async for line in response.aiter_lines():
                    if '"RUN_FINISHED"' in line:
                        results.append(json.loads(line[6:])["result"])
                        break
    assert results == ["one", "two"]


async def test_mcp_run_returns_when_its_turn_ends(served: Any,  # noqa: F811
                                                  redis_url: str) -> None:
    mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
    url = served([{"text": "one"}, {"text": "two"}],
                 extra_env={"STEERABLE_REDIS_URL": redis_url})
    async with mcp.Client(url + "/mcp") as client:
        texts = [(await client.call_tool("run", {"prompt": p, "session_id": "m1"}))
                 .structured_content["text"] for p in ("first", "second")]
    assert texts == ["one", "two"]
