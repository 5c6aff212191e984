"""kill -9 a process in the middle of a turn, then resume the turn in this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, TurnStatus
from steerable.storage import JSONLSessionStore
from tests.conftest import assert_history_consistent, assert_one_terminal_each
from tests.durable.crash_worker import make_tools

ROOT = Path(__file__).resolve().parents[2]


def run_until(tmp_path: Path, mode: str, marker: str, *, prefix: bool = False) -> list[str]:
    """Start the worker, SIGKILL it once ``marker`` is logged (a line starting with it, with
    ``prefix``); the lines it logged."""
    logfile = tmp_path / "log"
    logfile.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.durable.crash_worker", str(tmp_path / "data"),
         str(logfile), mode], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not any(line == marker or (prefix and line.startswith(marker))
                      for line in logfile.read_text().splitlines()):
            assert proc.poll() is None, "the worker ended before the marker"
            assert time.monotonic() < deadline, "the worker never reached the marker"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return logfile.read_text().splitlines()


def resume_loop(tmp_path: Path, script: list[Any]) -> tuple[AgentLoop, ScriptedProvider, list[str]]:
    ran: list[str] = []
    provider = ScriptedProvider(script)
    loop = AgentLoop(Agent(name="crash", provider=provider, tools=make_tools(ran.append)),
                     store=JSONLSessionStore(tmp_path / "data"))
    return loop, provider, ran


@pytest.mark.timeout(60)
async def test_killed_mid_tool_resumes_without_redoing_finished_work(tmp_path: Path) -> None:
    before = run_until(tmp_path, "mid_tool", "start 2")
    assert before == ["request 1", "start 1", "end 1", "start 2"]
    loop, provider, ran = resume_loop(tmp_path, [Reply(text="all steps done")])
    assert loop.session_messages("s") == []  # the crashed turn never reached history
    cp = loop.checkpoint("s")
    assert cp is not None and cp.reason == "interrupted"
    result = await loop.resume("s")  # type: ignore[misc]
    assert result.status is TurnStatus.COMPLETED and result.text == "all steps done"
    # Step 1 is not run again; step 2 (running at the kill) runs again and knows it.
    assert ran == ["start 2 resumed", "end 2", "start 3", "end 3"]
    assert len(provider.requests) == 1  # the first response was not requested again
    history = loop.session_messages("s")
    assert_history_consistent(history)
    assert [m.content for m in history if m.role == "tool"] == [
        "step 1 done", "step 2 done", "step 3 done"]
    assert loop.checkpoint("s") is None


@pytest.mark.timeout(60)
async def test_killed_mid_stream_requests_only_the_unfinished_response(tmp_path: Path) -> None:
    before = run_until(tmp_path, "mid_stream", "streaming 2")
    assert before == ["request 1", "start 1", "end 1", "request 2", "streaming 2"]
    loop, provider, ran = resume_loop(tmp_path, [Reply(text="final")])
    result = await loop.resume("s")  # type: ignore[misc]
    assert result.status is TurnStatus.COMPLETED and result.text == "final"
    assert ran == []  # step 1's result came from the checkpoint
    assert len(provider.requests) == 1
    assert [m.content for m in provider.requests[0].messages if m.role == "tool"] == ["step 1 done"]
    history = loop.session_messages("s")
    assert_history_consistent(history)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
async def test_an_acknowledged_steer_survives_kill_9_and_is_delivered_once(
        tmp_path: Path, store: str) -> None:
    """The steer and the follow-up are acknowledged, then the process dies before the turn's
    next safe point: the resumed turn delivers the steer once, under the same id, and hands
    the follow-up back with its id."""
    lines = run_until(tmp_path, f"steer_{store}", "acked follow_up", prefix=True)
    steer_id = next(x.split()[-1] for x in lines if x.startswith("acked steer"))
    follow_id = next(x.split()[-1] for x in lines if x.startswith("acked follow_up"))
    from tests.durable.crash_worker import store_for

    provider = ScriptedProvider([Reply(text="new plan done")])
    ran: list[str] = []
    loop = AgentLoop(Agent(name="crash", provider=provider, tools=make_tools(ran.append)),
                     store=store_for(str(tmp_path / "data"), f"steer_{store}"))
    sub = loop.subscribe()
    assert [m.message_id for m in loop.queued_messages("s")] == []
    handle = loop.resume("s")
    assert handle is not None
    assert [(m.message_id, m.kind) for m in loop.queued_messages("s")] == [
        (steer_id, "steer"), (follow_id, "follow_up")]
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    assert result.follow_ups == ("and then this",) and result.follow_up_ids == (follow_id,)
    sent = [m.content for m in provider.requests[0].messages]
    assert sent.count("change of plan") == 1
    assert sent.index("change of plan") > sent.index("do the steps")
    fates = assert_one_terminal_each(sub.drain_nowait())
    assert fates == {steer_id: "delivered", follow_id: "returned"}
    history = [m.content for m in loop.session_messages("s")]
    assert history.count("change of plan") == 1
    assert loop.checkpoint("s") is None
    await loop.aclose()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
async def test_messages_send_queued_behind_a_turn_survive_kill_9(tmp_path: Path,
                                                                 store: str) -> None:
    """Queued by ``send`` behind a running turn, acknowledged, then the process dies: the
    resumed turn hands them back as follow-ups, in order, under their ids; run through
    ``send`` again they are new messages linked to them."""
    lines = run_until(tmp_path, f"send_{store}", "acked all")
    ids = [x.split()[-1] for x in lines if x.startswith("acked send")]
    from tests.durable.crash_worker import store_for

    provider = ScriptedProvider([Reply(text="first done"), Reply(text="second done"),
                                 Reply(text="third done")])
    loop = AgentLoop(Agent(name="crash", provider=provider, tools=make_tools(lambda _: None)),
                     store=store_for(str(tmp_path / "data"), f"send_{store}"))
    sub = loop.subscribe()
    handle = loop.resume("s")
    assert handle is not None
    result = await handle
    assert result.follow_ups == ("second", "third") and result.follow_up_ids == tuple(ids)
    for text, origin in zip(result.follow_ups, result.follow_up_ids, strict=True):
        again = loop.send(text, "s", "follow_up")
        assert again.message_id != origin
    await loop.wait_session("s")
    assert [m.content for m in loop.session_messages("s") if m.role == "user"] == [
        "first", "second", "third"]
    assert assert_one_terminal_each(sub.drain_nowait())[ids[0]] == "returned"
    await loop.aclose()
