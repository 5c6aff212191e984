"""Bad input to a session on Temporal gets a clear error and changes nothing; controls for a
session that has no workflow answer False (or a falsy receipt), as locally with no turn."""

from __future__ import annotations

import pytest

from steerable import Agent, Reply, ScriptedProvider
from tests.temporal._harness import running


async def test_bad_input_is_refused_clearly(temporal_target: str, events_url: str,
                                            task_queue: str) -> None:
    provider = ScriptedProvider([Reply(text="fine")])
    agent = Agent(name="b", instructions="x", provider=provider)
    sid = f"{task_queue}-bad"
    async with running(agent, temporal_target, task_queue, events_url) as client:
        assert not await client.inject_steering("hello?", sid)  # no workflow yet
        assert await client.interrupt_hard(sid) is False
        assert await client.state(sid) is None
        with pytest.raises(ValueError, match="policy"):
            await client.send("x", sid, "sometimes")
        receipt = await client.send("hi", sid)
        assert (await client.result(sid, receipt.message_id)).text == "fine"
        with pytest.raises(ValueError, match="cancel mode"):
            await client.cancel(sid, "bogus")
        with pytest.raises(LookupError, match="no turn is known"):
            await client.result(sid, "msg_nope")
        assert await client.cancel(sid, "immediate") is False  # nothing runs
        # The session still works after the refusals.
        state = await client.state(sid)
        assert state is not None and state["busy"] is False and state["messages"] == 2
