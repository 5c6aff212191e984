"""kill -9 of the worker running a slow tool: the turn completes on another worker, the tool
ran at most twice (the second run knows it was resumed), the reply appears once, and a steer
posted during the failover is delivered exactly once; a question waits through a kill -9; and
a worker that hangs holding a session's first workflow task (the update-with-start's) loses it
to another after Temporal's task timeout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from steerable import Agent
from steerable.temporal import TemporalClient, TemporalWorker
from tests.temporal._harness import events_until, replay_all, turn_end
from tests.temporal._worker_proc import InstantProvider

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)  # worker processes start, and a heartbeat must lapse


class Workers:
    def __init__(self, target: str, queue: str, events_url: str, folder: Path) -> None:
        self.args = [target, queue, events_url, str(folder)]
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, mode: str = "failover") -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "tests.temporal._worker_proc",
                                 *self.args, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", f"the worker did not start: {line!r}"
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture
def workers(temporal_target: str, task_queue: str, events_url: str,
            tmp_path: Path) -> Iterator[Workers]:
    group = Workers(temporal_target, task_queue, events_url, tmp_path)
    yield group
    group.stop()


def _runs(folder: Path) -> list[dict[str, object]]:
    path = folder / "runs"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


async def test_kill_9_mid_tool_the_turn_completes_on_another_worker(
        workers: Workers, temporal_target: str, task_queue: str, events_url: str,
        tmp_path: Path) -> None:
    first = await asyncio.to_thread(workers.start)
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue,
                                          events_url=events_url)
    try:
        receipt = await client.send("go", "fail-1")
        deadline = time.monotonic() + 20
        while not _runs(tmp_path):
            assert time.monotonic() < deadline, "the tool never started"
            await asyncio.sleep(0.05)
        # The only worker runs the session's workflow and its tool: start another, kill it.
        await asyncio.to_thread(workers.start)
        victim = int(str(_runs(tmp_path)[0]["pid"]))
        assert victim == first.pid and first.poll() is None, "the tool ended before the kill"
        os.kill(victim, signal.SIGKILL)
        steer = await client.inject_steering("and mind the steer", "fail-1")
        assert steer, "the steer was refused during the failover"
        outcome = await asyncio.wait_for(client.result("fail-1", receipt.message_id), 60)
        assert outcome.status == "completed" and outcome.text == "all done"

        runs = _runs(tmp_path)
        assert len(runs) == 2, runs  # killed mid-run, so it ran again: at most twice
        assert runs[0]["resumed"] is False
        assert runs[1]["resumed"] is True and runs[1]["pid"] != victim

        messages = await client.session_messages("fail-1")
        replies = [m for m in messages if m.role == "assistant" and m.content == "all done"]
        assert len(replies) == 1
        assert [m.content for m in messages if m.role == "user"].count(
            "and mind the steer") == 1

        events = await events_until(client, "fail-1", turn_end)
        assert [e["kind"] for e in events].count("turn_end") == 1
        delivered = [e for e in events if e["kind"] == "message_state"
                     and e["message_id"] == steer.message_id and e["state"] == "delivered"]
        assert len(delivered) == 1
        numbers = [e["seq"] for e in events if e["kind"] not in ("llm_delta",
                                                                 "tool_exec_progress")]
        assert numbers == sorted(set(numbers)), "an engine event reached the stream twice"
    finally:
        await client.aclose()


async def test_kill_9_while_a_question_waits_the_answer_reaches_a_new_worker(
        workers: Workers, temporal_target: str, task_queue: str, events_url: str,
        tmp_path: Path) -> None:
    first = await asyncio.to_thread(workers.start, "ask")
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue,
                                          events_url=events_url)
    try:
        receipt = await client.send("go", "ask-1")
        asked = (await events_until(client, "ask-1",
                                    lambda e: e["kind"] == "question_asked"))[-1]
        # Listed from the workflow's memo, once the step that asked is recorded.
        deadline = time.monotonic() + 30
        while not (pending := await client.pending_requests("ask-1")):
            assert time.monotonic() < deadline, "the question is not listed"
            await asyncio.sleep(0.1)
        assert [r["request_id"] for r in pending] == [asked["request_id"]]
        first.kill()  # nothing runs now: the question waits in the workflow, not in a worker
        await asyncio.to_thread(first.wait, 10)
        await asyncio.to_thread(workers.start, "ask")
        await client.answer(asked["request_id"], "yes")
        outcome = await asyncio.wait_for(client.result("ask-1", receipt.message_id), 60)
        assert (outcome.status, outcome.text) == ("completed", "all done")
        runs = _runs(tmp_path)
        assert [r["resumed"] for r in runs] == [False, True]  # asked, then ran with the answer
        assert runs[1]["pid"] != first.pid
        messages = await client.session_messages("ask-1")
        assert [m.content for m in messages if m.role == "tool"] == ["answered yes"]
        events = await events_until(client, "ask-1", turn_end)
        assert [e["kind"] for e in events].count("question_asked") == 1
        assert [e["value"] for e in events if e["kind"] == "question_answered"] == ["yes"]
    finally:
        await client.aclose()


async def test_the_first_workflow_task_times_out_the_send_is_answered_by_another_worker(
        workers: Workers, temporal_target: str, task_queue: str, events_url: str,
        tmp_path: Path) -> None:
    """The session's first workflow task (the one that runs the update-with-start's ``send``)
    taken by a worker that hangs before completing it: Temporal times the task out (10 s),
    another worker runs it, and the caller gets its receipt from there, with the same id."""
    await asyncio.to_thread(workers.start, "stall")
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue,
                                          events_url=events_url)
    try:
        sending = asyncio.ensure_future(client.send("go", "stall-1"))
        deadline = time.monotonic() + 30
        while not (tmp_path / "stalled").exists():  # the first worker holds the first task
            assert time.monotonic() < deadline and not sending.done(), "no stall"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(workers.start, "instant")
        receipt = await asyncio.wait_for(sending, 60)
        assert receipt and receipt.action == "started"
        outcome = await asyncio.wait_for(client.result("stall-1", receipt.message_id), 60)
        assert (outcome.status, outcome.text) == ("completed", "ok")
        history = await client._handle("stall-1").fetch_history()
        kinds = [EventType.Name(e.event_type) for e in history.events]
        assert kinds[:4] == ["EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
                             "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED",
                             "EVENT_TYPE_WORKFLOW_TASK_STARTED",
                             "EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT"], kinds[:6]
        accepted = [e for e in history.events if e.HasField(
            "workflow_execution_update_accepted_event_attributes")]
        assert len(accepted) == 2  # send, then result: the send once
        await replay_all(TemporalWorker(Agent(name="instant", instructions="x",
                                              provider=InstantProvider())), client)
    finally:
        await client.aclose()
