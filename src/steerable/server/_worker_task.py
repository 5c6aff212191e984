"""The worker a runner serves from runs as a task of the server: started until it is ready
(or has failed, whose error is raised), and stopped by asking it to and waiting for it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

__all__ = ["WorkerTask"]


class _Worker(Protocol):
    ready: asyncio.Event

    def run(self) -> Coroutine[Any, Any, None]: ...

    def stop(self) -> None: ...


class WorkerTask:
    def __init__(self, worker: _Worker) -> None:
        self.worker = worker
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = task = loop.create_task(self.worker.run())
        ready = loop.create_task(self.worker.ready.wait())
        await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            ready.cancel()
            task.result()  # raises what stopped the worker

    async def stop(self) -> None:
        self.worker.stop()
        if self._task is not None:
            await self._task
