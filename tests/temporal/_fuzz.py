"""A randomized determinism check of the session workflow: many sessions, each a random
script of what happens in the field, at random moments relative to the activities, on
workers that come and go; then every history is replayed, whole and cut after each of its
workflow tasks, here and in a process with another ``PYTHONHASHSEED``.

A script mixes ``send`` (each busy policy), steer, follow-up, graceful and hard interrupts,
the three cancel modes, ``result``, revoke, edit, and answers to questions and approvals
(some refused as invalid). Workers: the first may keep no workflow in its cache (every step
a replay from the history), and mid-run another worker may take over the task queue while
the first stops (as after a crash: the sessions move, cold, to the new one). What fails:
a workflow task that failed on a worker (a non-determinism met live), a replay that decides
differently from its history, and a session coroutine left suspended once the workers
stopped (the garbage collector would run its ``finally`` in another workflow). What is
reported apart: sessions stuck (no progress for a minute: a liveness bug) and, as load,
slow drains, slow calls and workflow tasks that timed out. The bounded run is
``tests/temporal/test_determinism.py``; a long one ``bench/bench_determinism.py``.

``python -m tests.temporal._fuzz KIND SEED MAX_HISTORY IDLE_CLOSE DIR`` replays the histories
saved in ``DIR`` (``*.json``) with KIND's agent and prints the failures (the subprocess of the
check; ``IDLE_CLOSE`` in seconds or ``None``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, TimeoutType, WorkflowTaskFailedCause
from temporalio.client import WorkflowHistory
from temporalio.service import RPCError

from steerable.server._worker_task import WorkerTask
from steerable.temporal import CallOptions, TemporalClient, TemporalWorker
from tests.temporal._fuzz_agents import PERMISSIONS, build
from tests.temporal._harness import names, replay_report, session_coroutines

__all__ = ["Plan", "Report", "fuzz", "prefixes", "replay_histories"]

ROOT = Path(__file__).resolve().parents[2]
_POLICIES = (None, "steer", "follow_up", "interrupt", "rollback", "reject")
_ACTIONS = {"send": 6, "steer": 2, "follow_up": 2, "graceful": 1, "hard": 1, "cancel": 1,
            "result": 2, "revoke": 1, "edit": 1, "answer": 4, "close": 1}
_CALL = 10.0
"""How long the fuzzer waits for one client call before it goes on (seconds): a call that
takes longer is slow (counted), not lost (the update may still land, as a late one would)."""
_STALL = 60.0
"""How long a session may make no progress (no new event, no request opened or closed, no
update finished) before it counts as stuck: a liveness bug, not load."""
_PATIENCE = 600.0
"""The longest the drain waits for a session that keeps progressing (a slow one)."""
_FATAL = {WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR,
          WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE}


@dataclass
class Plan:
    """One fuzz run: ``sessions`` at once with ``kind``'s agent, from ``seed``."""

    seed: int
    sessions: int = 12
    kind: str = "main"
    actions: tuple[int, int] = (3, 8)
    """How many actions a session's script has (at least, at most)."""
    cold: bool = False
    """The first worker caches no workflow: each step replays the session's history."""
    move: bool = True
    """Mid-run another worker takes over and the first stops."""
    takeover_cached: bool | None = None
    """Whether the worker that takes over caches workflows (None: drawn from the seed). One
    that does not replays each session's whole history for every workflow task and every
    query: the slowest case."""
    max_history: int = 20_000
    """Low: sessions continue as new (once idle) during the run."""
    idle_close: float | None = None
    """Seconds idle after which a session's run completes (None: never); the next ``send``
    starts the next run from its state. Below the longest pause of a script (0.4 s), runs
    close and continue in the middle of scripts."""
    prefixes: int | None = None
    """Cut histories replayed per session (None: all of them)."""
    subprocess: bool = True
    """Also replay in another process, with another ``PYTHONHASHSEED``."""


@dataclass
class Report:
    plan: Plan
    actions: collections.Counter[str] = field(default_factory=collections.Counter)
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)
    stuck: list[str] = field(default_factory=list)
    """Sessions that stopped progressing (``_STALL``) or never became idle."""
    slow: list[float] = field(default_factory=list)
    """How long each session's drain took that took longer than ``4 * _CALL`` (seconds)."""
    slow_calls: int = 0
    """Client calls that took longer than ``_CALL`` (they went on in the background)."""
    task_timeouts: int = 0
    """Workflow tasks a worker did not complete in time (10 s): the worker was saturated."""
    takeover: str = "none"
    histories: int = 0
    replays: int = 0
    failures: list[str] = field(default_factory=list)
    """Workflow tasks failed on a worker, and replays that decided differently."""

    def summary(self) -> str:
        slow = f" (up to {max(self.slow):.0f} s)" if self.slow else ""
        return (f"seed {self.plan.seed} {self.plan.kind}: {self.histories} histories, "
                f"{self.replays} replays, actions {dict(self.actions)}, refused "
                f"{dict(self.refusals)}, takeover {self.takeover}, slow calls "
                f"{self.slow_calls}, slow drains {len(self.slow)}{slow}, workflow tasks "
                f"timed out {self.task_timeouts}, stuck {len(self.stuck)}, failures "
                f"{len(self.failures)}")


def worker_for(plan: Plan, agent: Any, **more: Any) -> TemporalWorker:
    """A worker of ``plan``'s sessions; a replayer must be made alike (what the workflow
    decides depends on these settings)."""
    return TemporalWorker(agent, permissions=PERMISSIONS, human_approval=True,
                          idle_close=plan.idle_close, max_history=plan.max_history,
                          options=CallOptions(heartbeat_timeout=2), **more)


class Fleet:
    """The task queue's workers: started, replaced mid-run, stopped at the end."""

    def __init__(self, agent: Any, target: str, queue: str, events_url: str | None,
                 plan: Plan) -> None:
        self.agent, self.target, self.queue, self.events_url = agent, target, queue, events_url
        self.plan = plan
        self.running: list[WorkerTask] = []

    async def start(self, cached: bool) -> TemporalWorker:
        worker = worker_for(self.plan, self.agent, target=self.target, task_queue=self.queue,
                            events_url=self.events_url, sticky_timeout=1.0,
                            max_cached_workflows=1000 if cached else 0)
        task = WorkerTask(worker)
        await task.start()
        self.running.append(task)
        return worker

    async def stop_first(self) -> None:
        await self.running.pop(0).stop()

    async def aclose(self) -> None:
        while self.running:
            await self.stop_first()


async def fuzz(plan: Plan, target: str, queue: str, events_url: str | None = None) -> Report:
    """Run ``plan``'s sessions, then check every history they made."""
    report = Report(plan)
    rng = random.Random(plan.seed)
    agent = build(plan.kind, plan.seed)
    fleet = Fleet(agent, target, queue, events_url, plan)
    client = await TemporalClient.connect(target, task_queue=queue)
    try:
        worker = await fleet.start(cached=not plan.cold)
        sessions = [_session(client, f"{queue}-{i}", random.Random(rng.random()), report, plan)
                    for i in range(plan.sessions)]
        if plan.move:
            after = rng.random() * 1.5
            cached = plan.takeover_cached
            if cached is None:
                cached = rng.random() < 0.5
            report.takeover = f"{'cached' if cached else 'cold'} at {after:.1f} s"
            sessions.append(_move(fleet, after, cached))
        await asyncio.gather(*sessions)
        histories = await _histories(client, queue, plan.sessions)
        await fleet.aclose()
        # Every worker stopped: a session coroutine still suspended would be closed by the
        # garbage collector later, in another workflow's context (``_eviction``).
        if left := names(session_coroutines(queue)):
            report.failures.append(f"workers stopped, session coroutines left: {left}")
        report.histories = len(histories)
        for history in histories:
            report.failures += _task_failures(history)
            report.task_timeouts += _task_timeouts(history)
        await _replay(worker, histories, plan, rng, report)
    finally:
        await client.aclose()
        await fleet.aclose()
    return report


async def _move(fleet: Fleet, after: float, cached: bool) -> None:
    """Another worker takes the queue over at a random moment; the first stops (its sessions
    wait out their sticky timeout, then replay from their histories on the new one)."""
    await asyncio.sleep(after)
    await fleet.start(cached=cached)
    await fleet.stop_first()


class Stalled(Exception):
    """A session that stopped moving (or never settled): what the fuzzer reports as stuck."""


async def _session(client: TemporalClient, sid: str, rng: random.Random, report: Report,
                   plan: Plan) -> None:
    known: list[str] = []
    waits: list[asyncio.Task[Any]] = []
    stage = "start"
    try:
        for i in range(rng.randint(*plan.actions)):
            action = "send" if i == 0 else rng.choices(*zip(*_ACTIONS.items(), strict=True))[0]
            await asyncio.sleep(rng.random() * 0.4)  # a random moment of the turn
            report.actions[action] += 1
            stage = action
            try:
                await asyncio.wait_for(_act(client, sid, rng, action, known, waits), _CALL)
            except TimeoutError:  # slow, not lost: the drain tells whether the session moves
                report.slow_calls += 1
            except Exception as exc:  # refused (busy, unknown id, invalid answer...): fine
                report.refusals[type(exc).__name__] += 1
        stage = "drain"
        began = time.monotonic()
        await _drain(client, sid, rng)
        if (took := time.monotonic() - began) > 4 * _CALL:
            report.slow.append(took)
        stage = "results"
        # Idle now: every turn ended, so every result must come (a result update accepted
        # and never completed is a liveness bug).
        if waits and (await asyncio.wait(waits, timeout=_STALL))[1]:
            raise Stalled(f"a result unanswered {_STALL:.0f} s after the session went idle")
    except Exception as exc:  # a call that never returned, or a workflow that cannot answer
        try:
            state: Any = await asyncio.wait_for(client.state(sid), _CALL)
        except Exception as error:
            state = f"no answer to a query: {error}"
        report.stuck.append(f"{sid} at {stage} ({type(exc).__name__}: {exc}): {state}")
    finally:
        for wait in waits:
            wait.cancel()


async def _act(client: TemporalClient, sid: str, rng: random.Random, action: str,
               known: list[str], waits: list[asyncio.Task[Any]]) -> None:
    text = f"{action} {rng.randrange(1000)}"
    if action == "send":
        receipt = await client.send(text, sid, rng.choice(_POLICIES))
        known.append(receipt.message_id)
        waits.append(asyncio.create_task(_result(client, sid, receipt.message_id)))
    elif action in ("steer", "follow_up"):
        inject = client.inject_steering if action == "steer" else client.inject_follow_up
        known.append((await inject(text, sid)).message_id)
    elif action == "graceful":
        await client.interrupt_graceful(sid, rng.choice([None, "stop"]))
    elif action == "hard":
        await client.interrupt_hard(sid)
    elif action == "cancel":
        await client.cancel(sid, rng.choice(["immediate", "after_model", "after_tools"]))
    elif action == "result" and known:
        waits.append(asyncio.create_task(_result(client, sid, rng.choice(known))))
    elif action == "revoke" and known:
        await client.revoke_message(rng.choice(known), session_id=sid)
    elif action == "edit" and known:
        await client.edit_message(rng.choice(known), text, session_id=sid)
    elif action == "answer":
        await _answer(client, sid, rng, valid=rng.random() < 0.8)
    elif action == "close":  # for good once idle: a later send starts afresh
        await client.close_session(sid)


async def _result(client: TemporalClient, sid: str, message_id: str) -> None:
    """Wait for a turn's outcome (the session's ``results`` stage bounds the wait)."""
    with contextlib.suppress(Exception):  # not a turn's message (a steer's): refused, fine
        await client.result(sid, message_id)


async def _answer(client: TemporalClient, sid: str, rng: random.Random, *,
                  valid: bool = True, state: dict[str, Any] | None = None) -> None:
    """Answer every open question and approval of ``sid`` (as ``state`` lists them, else as
    a query tells); not ``valid``: with a value the question refuses (it stays open)."""
    if state is None:
        state = await client.state(sid)
    for request in (state or {}).get("requests", []):
        rid = request["request_id"]
        try:
            if request["kind"] == "question":
                choice = rng.choice(request["choices"] or ["x"]) if valid else "green"
                await client.answer(rid, choice, session_id=sid)
            else:
                await client.resolve_approval(rid, rng.random() < 0.7, session_id=sid)
        except Exception:  # answered meanwhile, or refused: the next look sees
            continue


async def _drain(client: TemporalClient, sid: str, rng: random.Random) -> None:
    """Answer what the session asks until it is idle: every turn ends. Slow is fine (a
    worker that caches no workflow replays the whole history for every task and query:
    many sessions at once saturate it); ``Stalled`` when nothing moved for ``_STALL``
    seconds, or still not idle after ``_PATIENCE``. Polls gently, backing off while nothing
    changes: each poll is such a query."""
    clock = asyncio.get_running_loop().time
    began = moved = clock()
    seen: tuple[Any, ...] | None = None
    pause = 0.05
    while True:
        behind = False
        try:
            state = await asyncio.wait_for(client.state(sid), _CALL)
        except (TimeoutError, RPCError):  # the worker is behind: no news
            behind = True
        if not behind:
            if state is None or not (state["busy"] or state["requests"] or state["queued"]):
                return
            mark = (state["last_seq"], state["busy"],
                    tuple(r["request_id"] for r in state["requests"]),
                    tuple((m["message_id"], m["state"]) for m in state["queued"]))
            if mark != seen:
                seen, moved, pause = mark, clock(), 0.05
            with contextlib.suppress(TimeoutError):  # the next poll tells
                await asyncio.wait_for(_answer(client, sid, rng, state=state), _CALL)
        if clock() - moved > _STALL:
            raise Stalled(f"no progress for {_STALL:.0f} s")
        if clock() - began > _PATIENCE:
            raise Stalled(f"still busy after {_PATIENCE:.0f} s, though moving")
        await asyncio.sleep(pause)
        pause = min(2 * pause, 1.0)


async def _histories(client: TemporalClient, queue: str, sessions: int
                     ) -> list[WorkflowHistory]:
    """Every run of the queue's sessions (continued runs too), once visibility lists them."""
    query = f'TaskQueue="{queue}"'
    found: list[WorkflowHistory] = []
    for _ in range(200):  # visibility trails the workflows a moment
        found = [h async for h in client.client.list_workflows(query).map_histories()]
        if len({h.workflow_id for h in found}) >= sessions:
            break
        await asyncio.sleep(0.05)
    return found


def _task_timeouts(history: WorkflowHistory) -> int:
    """Workflow tasks a worker took but did not complete in time (not those a stopped
    worker's sticky queue never handed out)."""
    return sum(event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
               and event.workflow_task_timed_out_event_attributes.timeout_type
               == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE for event in history.events)


def _task_failures(history: WorkflowHistory) -> list[str]:
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    out = []
    for event in history.events:
        attrs = event.workflow_task_failed_event_attributes
        if event.event_type == failed and attrs.cause in _FATAL:
            out.append(f"{history.workflow_id}: workflow task failed at event {event.event_id}:"
                       f" {attrs.failure.message}\n" + replay_report(history, Exception("-")))
    return out


def prefixes(history: WorkflowHistory) -> Iterator[WorkflowHistory]:
    """``history`` cut after each of its completed workflow tasks (before its end): what a
    worker taking the session over at that moment replays."""
    completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    events = list(history.events)
    for i, event in enumerate(events[:-1]):
        if event.event_type == completed:
            yield WorkflowHistory(history.workflow_id, events[:i + 1])


def _cuts(histories: Sequence[WorkflowHistory], limit: int | None,
          rng: random.Random) -> list[WorkflowHistory]:
    out: list[WorkflowHistory] = []
    for history in histories:
        cuts = list(prefixes(history))
        out += cuts if limit is None or len(cuts) <= limit else rng.sample(cuts, limit)
    return out


async def replay_histories(worker: TemporalWorker, histories: Sequence[WorkflowHistory]
                           ) -> list[str]:
    """Each history replayed; the report of each that decided differently."""
    async def each() -> AsyncIterator[WorkflowHistory]:
        for history in histories:
            yield history

    return [replay_report(history, failure)
            for history, failure in await worker.replay_each(each()) if failure is not None]


async def _replay(worker: TemporalWorker, histories: list[WorkflowHistory], plan: Plan,
                  rng: random.Random, report: Report) -> None:
    every = [*histories, *_cuts(histories, plan.prefixes, rng)]
    report.replays = len(every)
    report.failures += await replay_histories(worker, every)
    if plan.subprocess and histories:
        report.failures += _replay_elsewhere(plan, histories)


def _replay_elsewhere(plan: Plan, histories: list[WorkflowHistory]) -> list[str]:
    """Replay the whole histories in a new process with another hash seed: a failover runs
    the session in another process, where str hashes (set and dict orders) differ."""
    with tempfile.TemporaryDirectory(prefix="steerable-fuzz-") as folder:
        for i, history in enumerate(histories):
            (Path(folder) / f"{i}.json").write_text(
                json.dumps({"workflow_id": history.workflow_id, "history": history.to_json()}))
        seed = str(random.Random(plan.seed).randrange(1, 1 << 31))
        done = subprocess.run(
            [sys.executable, "-m", "tests.temporal._fuzz", plan.kind, str(plan.seed),
             str(plan.max_history), str(plan.idle_close), folder],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONHASHSEED": seed,
                 "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])})
    if done.returncode == 0:
        return []
    how = (f"killed by signal {-done.returncode}" if done.returncode < 0
           else f"exit status {done.returncode}")
    return [f"replay with PYTHONHASHSEED={seed} failed ({how}):\n{done.stdout}\n{done.stderr}"]


async def _main(plan: Plan, folder: Path) -> int:
    histories = []
    for path in sorted(folder.glob("*.json")):
        saved = json.loads(path.read_text())
        histories.append(WorkflowHistory.from_json(saved["workflow_id"], saved["history"]))
    worker = worker_for(plan, build(plan.kind, plan.seed))
    failures = await replay_histories(worker, histories)
    print("\n\n".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    kind, seed, max_history, idle_close, folder = sys.argv[1:]
    code = asyncio.run(_main(Plan(int(seed), kind=kind, max_history=int(max_history),
                                  idle_close=None if idle_close == "None"
                                  else float(idle_close)), Path(folder)))
    # The verdict is in: leave without the interpreter's finalization, where the SDK's native
    # threads sometimes abort the process ("Fatal Python error: PyGILState_Release ...
    # finalizing", seen under load), which read as a failed replay with no failure printed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
