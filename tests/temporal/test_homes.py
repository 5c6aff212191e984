"""Background commands on several Temporal workers: a command is a process on the worker that
started it, so ``bash_output`` and ``bash_kill`` about it are sent to that worker (its own task
queue, named by the command's id), a hard abort stops the aborted turn's commands wherever they
run, and a call for a worker that is gone says so instead of waiting forever.

Two workers run in this process, each with its own ``BackgroundShells`` (as two machines would
have), on one task queue. Which worker takes a call on the shared queue is Temporal's choice:
in practice the one running the session's workflow (it starts the calls it schedules itself),
until the session moves (its worker was busy past the sticky timeout, the session was evicted
or closed and came back). So the tests read in the session's history where each call was
scheduled, and check the outcome too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from steerable import Agent, Reply, ScriptedProvider, ToolContext
from steerable.coding import BackgroundShells, Sandbox, coding_tools
from steerable.errors import ConfigurationError
from steerable.server._worker_task import WorkerTask
from steerable.temporal import CallOptions, TemporalClient, TemporalWorker, WorkerHook
from steerable.temporal._client import workflow_id
from steerable.temporal._homes import Homes, check_home
from steerable.tools import BaseTool
from tests.temporal._harness import running

pytestmark = pytest.mark.timeout(120)

CALLS = 7


class _Machine:
    """One worker and the background commands of its machine."""

    def __init__(self, home: str, provider: ScriptedProvider, ws: Path, target: str,
                 task_queue: str) -> None:
        self.shells = BackgroundShells(home=home)
        self.stopped = False
        agent = Agent(provider=provider, tools=coding_tools(ws, sandbox=Sandbox(enabled=False),
                                                            shells=self.shells))
        self.task = WorkerTask(TemporalWorker(
            agent, target=target, task_queue=task_queue, home=home,
            hooks=[WorkerHook(self.shells)],
            options=CallOptions(heartbeat_timeout=3, home_wait=2)))

    async def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            await self.task.stop()
            await self.shells.aclose()


@asynccontextmanager
async def _machines(provider: ScriptedProvider, ws: Path, target: str, task_queue: str,
                    homes: tuple[str, ...]) -> AsyncIterator[Callable[[str], _Machine]]:
    made: dict[str, _Machine] = {}

    def machine(home: str) -> _Machine:
        return made[home]

    async with AsyncExitStack() as stack:
        for home in homes:
            made[home] = _Machine(home, provider, ws, target, task_queue)
            await made[home].task.start()
            stack.push_async_callback(made[home].stop)
        yield machine


async def _scheduled(client: TemporalClient, session_id: str) -> list[tuple[str, str]]:
    """(tool name, or hook point with the event's kind; task queue) of each call the session's
    workflow scheduled, in order."""
    handle = client.client.get_workflow_handle(workflow_id(session_id))
    out = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            call = json.loads(attrs.input.payloads[0].data)
            what = (f"{call['point']}:{call['ctx'].get('kind', '')}" if "point" in call
                    else call.get("name") or attrs.activity_type.name)
            out.append((what, attrs.task_queue.name))
    return out


async def _results(client: TemporalClient, session_id: str) -> list[str]:
    return [str(m.content) for m in await client.session_messages(session_id)
            if m.role == "tool"]


async def test_a_commands_output_is_read_on_the_worker_that_runs_it(
        tmp_path: Path, temporal_target: str, task_queue: str) -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("bash", {"command": "echo one; sleep 60", "background": True})]),
        Reply(text="started"),
        *[Reply(tool_calls=[("bash_output", {"id": "bg1@a"})]) for _ in range(CALLS)],
        Reply(text="read"),
    ])
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue)
    try:
        async with _machines(provider, tmp_path, temporal_target, task_queue, ("a",)):
            assert (await client.run_turn("start it", "h1")).text == "started"
            assert "bg1@a" in (await _results(client, "h1"))[0]
            # A second machine joins: each call could now be taken by either.
            async with _machines(provider, tmp_path, temporal_target, task_queue, ("b",)):
                assert (await client.run_turn("how is it going?", "h1")).text == "read"
                reads = (await _results(client, "h1"))[1:]
                where = await _scheduled(client, "h1")
        assert [q for name, q in where if name == "bash_output"] == [f"{task_queue}@a"] * CALLS
        assert len(reads) == CALLS
        assert "one" in reads[0] and all("no background command" not in r for r in reads), reads
    finally:
        await client.aclose()


async def test_a_hard_abort_stops_the_turns_commands_on_every_worker(
        tmp_path: Path, temporal_target: str, task_queue: str) -> None:
    started = [Reply(tool_calls=[("bash", {"command": f"sleep 60 # {n}", "background": True})])
               for n in range(3)]
    provider = ScriptedProvider([*started, Reply(text="never", delay=60)])
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue)
    try:
        async with _machines(provider, tmp_path, temporal_target, task_queue,
                             ("a", "b")) as machine:
            def running() -> int:
                return len(machine("a").shells.running()) + len(machine("b").shells.running())

            sent = await client.send("start them all", "h2")
            await _until(lambda: running() == 3)
            ran = {f"{task_queue}@{h}" for h in "ab" if machine(h).shells.running()}
            assert await client.interrupt_hard("h2")
            outcome = await client.result("h2", sent.message_id)
            assert outcome.status == "aborted", outcome
            await _until(lambda: running() == 0)
            where = await _scheduled(client, "h2")
        ends = {q for name, q in where if name == "on_event:turn_end"}
        assert ran and ends == ran, (ran, where)
    finally:
        await client.aclose()


async def test_a_call_for_a_worker_that_is_gone_says_so(
        tmp_path: Path, temporal_target: str, task_queue: str) -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("bash", {"command": "sleep 60", "background": True})]),
        Reply(text="started"),
        Reply(tool_calls=[("bash_output", {"id": "bg1@a"})]),
        Reply(text="checked"),
    ])
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue)
    try:
        async with _machines(provider, tmp_path, temporal_target, task_queue,
                             ("a",)) as machine:
            assert (await client.run_turn("start it", "h3")).text == "started"
            assert "bg1@a" in (await _results(client, "h3"))[0]
            async with _machines(provider, tmp_path, temporal_target, task_queue, ("b",)):
                await machine("a").stop()  # a is gone, and its commands with it
                assert (await client.run_turn("and now?", "h3")).text == "checked"
                last = (await _results(client, "h3"))[-1]
        assert "(a) is no longer running" in last, last
    finally:
        await client.aclose()


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # the test's timeout bounds the wait
        await asyncio.sleep(0.02)


def test_homes_keep_each_turns_workers_once_in_order_and_only_the_newest_turns() -> None:
    homes = Homes()
    for turn, home in [("t1", "b"), ("t1", "a"), ("t1", "b"), ("t1", None), ("t1", ""),
                       ("t2", "a")]:
        homes.seen(turn, home)
    assert (homes.of("t1"), homes.of("t2"), homes.of("t3")) == (("b", "a"), ("a",), ())
    for n in range(100):
        homes.seen(f"later{n}", "c")
    assert homes.of("t1") == () and homes.of("later99") == ("c",)


@pytest.mark.parametrize("home", ["", "a@b", "has space", "x" * 65, "é"])
def test_a_home_that_cannot_name_a_task_queue_is_refused(home: str) -> None:
    with pytest.raises(ConfigurationError, match="home"):
        check_home(home)


class _Pinned(BaseTool):
    """A tool of the user's own whose home_of names a home no worker can have."""

    name = "pinned"
    description = "Runs where its state is."

    def home_of(self, arguments: Mapping[str, Any]) -> str | None:
        return str(arguments.get("where"))

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        return "ran"


async def test_a_home_no_worker_can_have_is_refused_before_the_server_sees_it(
        temporal_target: str, task_queue: str) -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("pinned", {"where": "a b/" + "x" * 300})]), Reply(text="done")])
    agent = Agent(provider=provider, tools=[_Pinned()])
    async with running(agent, temporal_target, task_queue) as client:
        outcome = await client.run_turn("go", "h4")
        [result] = await _results(client, "h4")
    assert outcome.text == "done" and "no worker can be: nothing ran" in result, result
