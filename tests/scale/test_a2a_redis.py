"""A2A on ``steerable serve --redis``: the front process follows the task while a worker (here
the same process, as one worker of the group) runs the turn; the approval and the steer travel
through Redis."""

from __future__ import annotations

from typing import Any

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
