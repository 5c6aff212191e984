"""``TemporalWorker``: runs sessions' workflows and their activities for one agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, Worker

from steerable import Permissions
from steerable.errors import ConfigurationError
from steerable.temporal._activities import Activities
from steerable.temporal._eventlog import DEFAULT_PREFIX, EventLog, Publisher
from steerable.temporal._eviction import EvictingRunner
from steerable.temporal._homes import check_home, home_queue
from steerable.temporal._hooks import WorkerHook
from steerable.temporal._proxies import CallOptions, remote_agent
from steerable.temporal._workflow import SessionWorkflow, WorkerConfig, workflow_thread

__all__ = ["DEFAULT_TASK_QUEUE", "TemporalWorker"]

DEFAULT_TASK_QUEUE = "steerable"


class TemporalWorker:
    """One worker process's share of the sessions: ``await worker.run()`` until ``stop()``.

    Every worker of a task queue must run the same agent (instructions, tools, budget) with
    the same ``options``: a session's workflow may move from one worker to another at any
    point, and replays there. ``events_url`` is the Redis (``redis://...``) where sessions'
    events are published for followers (``TemporalClient.events``, ``steerable serve
    --temporal``); without it nobody can follow the events. ``human_approval``: the calls
    ``permissions`` ask about wait for ``resolve_approval`` (as long as it takes).
    ``idle_close``: seconds after which an idle session's workflow completes (None: never);
    the next message starts a new run from its state (the namespace's retention period is
    how long a closed session can be continued). ``hooks``: the sessions' loop hooks, each
    run in the workflow or in an activity (``WorkerHook``); ``reads``: what hooks in the
    workflow may read of the world, by name (``workflow_read``). ``home``: a name of this
    worker's own, unique among the task queue's workers, when its tools hold state that cannot
    travel (background commands: ``BackgroundShells(home=...)``); calls about that state are
    sent to this worker (``steerable.temporal._homes``).
    """

    def __init__(self, agent: Any, *, target: str = "127.0.0.1:7233",
                 namespace: str = "default", task_queue: str = DEFAULT_TASK_QUEUE,
                 events_url: str | None = None, events_prefix: str = DEFAULT_PREFIX,
                 permissions: Permissions | None = None, options: CallOptions | None = None,
                 max_history: int = 20_000, idle_close: float | None = 3600.0,
                 human_approval: bool = False, hooks: Sequence[WorkerHook] = (),
                 reads: Mapping[str, Callable[..., Any]] | None = None,
                 client: Client | None = None,
                 redact: Callable[[str], str] | None = None,
                 max_concurrent_activities: int = 100, sticky_timeout: float = 3.0,
                 max_cached_workflows: int = 1000, home: str | None = None) -> None:
        self.options = options or CallOptions()
        remote_agent(agent, lambda: 0, self.options)  # refuse what cannot run, now
        self.agent = agent
        self.target = target
        self.namespace = namespace
        self.task_queue = task_queue
        self.events_url = events_url
        self.events_prefix = events_prefix
        self.permissions = permissions
        self.max_history = max_history
        if idle_close is not None and idle_close <= 0:
            raise ConfigurationError(f"idle_close must be > 0 seconds or None, got {idle_close}")
        self.idle_close = idle_close
        self.human_approval = human_approval
        self.hooks = tuple(hooks)
        for spec in self.hooks:
            if not isinstance(spec, WorkerHook):
                raise ConfigurationError(f"hooks takes WorkerHook(hook, ...) items, got "
                                         f"{type(spec).__name__}")
        self.reads = dict(reads or {})
        self.redact = redact
        self.max_concurrent_activities = max_concurrent_activities
        self.sticky_timeout = sticky_timeout
        """How long a session's next step waits for the worker that ran its last one before
        any worker takes it (a dead worker's sessions move after this)."""
        self.max_cached_workflows = max_cached_workflows
        """Sessions kept in memory between steps (Temporal's default, 1000); 0 replays each
        session's history at every step, which checks determinism live."""
        self.home = None if home is None else check_home(home)
        """This worker's own task queue's name beside the shared one (``_homes``): calls for
        state only it holds (its background commands) are sent there. None: no such state."""
        self.client = client
        self.ready = asyncio.Event()
        self._worker: Worker | None = None

    async def run(self) -> None:
        client = self.client or await Client.connect(self.target, namespace=self.namespace)
        log = (EventLog(self.events_url, prefix=self.events_prefix, redact=self.redact)
               if self.events_url else None)
        publisher = Publisher(log) if log is not None else None
        activities = Activities(self.agent, publisher,
                                hooks=[h.hook for h in self.hooks if not h.in_workflow],
                                reads=self.reads, home=self.home)
        # One thread runs every workflow's code: the engine checks that it is called from the
        # thread it was bound on, and workflow code is cheap next to the calls it waits for.
        # The sessions left in the cache when the worker stops are evicted by us: the SDK
        # leaves them to the garbage collector (``_eviction``).
        runner = EvictingRunner()
        with workflow_thread(self._config(publisher), "steerable-workflows") as executor:
            self._worker = Worker(
                client, task_queue=self.task_queue, workflows=[SessionWorkflow],
                activities=[activities.llm, activities.tool, activities.hook,
                            activities.read],
                workflow_task_executor=executor, unsandboxed_workflow_runner=runner,
                max_concurrent_activities=self.max_concurrent_activities,
                sticky_queue_schedule_to_start_timeout=timedelta(seconds=self.sticky_timeout),
                max_cached_workflows=self.max_cached_workflows)
            try:
                async with self._worker, self._home_worker(client, activities):
                    self.ready.set()
                    await self._stopped()
            finally:
                await runner.evict_left(executor)
                if publisher is not None:
                    await publisher.aclose()
                if log is not None:
                    await log.aclose()

    def _home_worker(self, client: Client,
                     activities: Activities) -> AbstractAsyncContextManager[object]:
        """The worker of this worker's home queue: tool and hook calls only (``_homes``)."""
        if self.home is None:
            return nullcontext()
        return Worker(client, task_queue=home_queue(self.task_queue, self.home),
                      activities=[activities.tool, activities.hook],
                      max_concurrent_activities=self.max_concurrent_activities)

    def _config(self, publisher: Publisher | None) -> WorkerConfig:
        return WorkerConfig(self.agent, publisher, self.permissions, self.options,
                            self.max_history, self.idle_close, self.human_approval,
                            self.hooks)

    async def replay(self, histories: AsyncIterator[WorkflowHistory]) -> None:
        """Run sessions' recorded histories through this worker's code, as a worker taking
        them over would, without calling anything or publishing events: raises
        ``NondeterminismError`` when the code would decide differently (check a new version
        of the agent or of steerable before deploying it beside running sessions)."""
        runner = EvictingRunner()
        with workflow_thread(self._config(None), "steerable-replay") as executor:
            try:
                await Replayer(workflows=[SessionWorkflow], workflow_task_executor=executor,
                               unsandboxed_workflow_runner=runner
                               ).replay_workflows(histories)
            finally:
                await runner.evict_left(executor)

    async def replay_each(self, histories: AsyncIterator[WorkflowHistory]
                          ) -> list[tuple[WorkflowHistory, Exception | None]]:
        """As ``replay``, on through every history: each with how its replay failed (None:
        it decided the same), so one run reports every session that would break."""
        runner = EvictingRunner()
        with workflow_thread(self._config(None), "steerable-replay") as executor:
            replayer = Replayer(workflows=[SessionWorkflow], workflow_task_executor=executor,
                                unsandboxed_workflow_runner=runner)
            try:
                async with replayer.workflow_replay_iterator(histories) as results:
                    return [(r.history, r.replay_failure) async for r in results]
            finally:
                await runner.evict_left(executor)

    async def _stopped(self) -> None:
        self._stop = asyncio.Event()
        await self._stop.wait()

    def stop(self) -> None:
        """Finish: the worker stops polling, waits for the calls it runs, and ``run`` returns."""
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
