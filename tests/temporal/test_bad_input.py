"""Bad input to a session on Temporal gets a clear error and changes nothing; controls for a
session that has no workflow answer False (or a falsy receipt), as locally with no turn."""

from __future__ import annotations

import subprocess
import sys

import pytest

from steerable import Agent, Reply, ScriptedProvider
from steerable.errors import UnknownRequestError
from tests.coding.conftest import cli_env  # noqa: F401 (fixture)
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
        with pytest.raises(UnknownRequestError):
            await client.answer("question_nope", "x", session_id=sid)
        assert await client.resolve_approval("approval_nope", True, session_id=sid) is False


def test_the_cli_says_what_is_wrong_on_temporal(cli_env, temporal_target: str,  # noqa: F811
                                                task_queue: str) -> None:
    where = ["--temporal", temporal_target, "--task-queue", task_queue]
    for args, says in ((["sessions", "list", "--temporal", "127.0.0.1:1"], "cannot reach"),
                       (["answer", "question_nope", "x", *where], "no waiting request"),
                       (["sessions", "show", "nobody", *where], "no session")):
        done = subprocess.run([sys.executable, "-m", "steerable", *args], env=cli_env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
