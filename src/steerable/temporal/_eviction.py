"""Workflows a stopped worker still holds, evicted before they are dropped.

A worker keeps the sessions it ran in its cache between steps. The SDK evicts a cached
workflow safely (it cancels the workflow's tasks and lets them finish on the workflow's own
event loop) when Temporal asks it to, but not when the worker stops (temporalio 1.35:
sdk-core reports its shutdown complete without evicting the runs idle in its cache, and the
Python side drops them). Their coroutines are then left suspended, and the garbage collector
closes them later, wherever it runs: on the workflow thread of another worker of the process,
in the middle of another session's workflow task. Every ``finally`` of the engine then runs
in that workflow's context and on its event loop (``asyncio.get_running_loop()``, a task or
a timer started there becomes the other workflow's, a context variable set there is its);
the seeded id source was one such case. A process that stops a worker and starts another
(a server reloading its worker, the tests, the determinism fuzzer) met it.

``EvictingRunner`` is the SDK's unsandboxed runner that keeps the instances it made until
the SDK evicts them; ``evict_left`` evicts those still held once the worker has stopped, on
the workflow thread, as the SDK would have: each session's tasks end on its own loop, and
nothing is left for the garbage collector.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

from temporalio.bridge.proto.workflow_activation import (
    RemoveFromCache,
    WorkflowActivation,
    WorkflowActivationJob,
)
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import UnsandboxedWorkflowRunner, WorkflowInstance
from temporalio.worker import WorkflowInstanceDetails as Details

__all__ = ["EvictingRunner"]

log = logging.getLogger("steerable.temporal")


class EvictingRunner(UnsandboxedWorkflowRunner):
    """Runs workflows unsandboxed, as the SDK's own runner, and remembers the instances the
    SDK has not evicted yet."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[str, _Held] = {}
        """Run id -> its instance, from its start until its eviction."""

    def create_instance(self, det: Details) -> WorkflowInstance:
        held = _Held(super().create_instance(det), self.held)
        self.held[held.get_info().run_id] = held
        return held

    async def evict_left(self, executor: concurrent.futures.Executor) -> int:
        """Evict every instance still held, on ``executor`` (the workflow thread); call it
        once the worker has stopped (no activation runs any more). How many there were."""
        left = list(self.held.values())
        loop = asyncio.get_running_loop()
        for held in left:
            try:
                await loop.run_in_executor(executor, held.evict)
            except Exception:  # a workflow whose tasks would not end: say so, go on
                log.exception("evicting session workflow %s at shutdown failed",
                              held.get_info().workflow_id)
        self.held.clear()
        return len(left)


class _Held(WorkflowInstance):
    """An instance of the SDK's, dropped from ``held`` when it is evicted."""

    def __init__(self, inner: WorkflowInstance, held: dict[str, _Held]) -> None:
        self._inner = inner
        self._held = held

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        try:
            return self._inner.activate(act)
        finally:
            if any(job.HasField("remove_from_cache") for job in act.jobs):
                self._held.pop(act.run_id, None)

    def evict(self) -> None:
        """What the SDK does on Temporal's eviction: cancel the workflow's tasks and run its
        loop until they end (a workflow whose tasks would not end raises)."""
        run_id = self.get_info().run_id
        act = WorkflowActivation(run_id=run_id, jobs=[WorkflowActivationJob(
            remove_from_cache=RemoveFromCache(
                message="the worker stopped",
                reason=RemoveFromCache.EvictionReason.LANG_REQUESTED))])
        self.activate(act)

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Any:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()
