"""Running blocking user code (sync tools and hooks) without holding the process open.

``asyncio.to_thread`` uses the loop's default executor, and ``asyncio.run`` waits for every
thread of it at exit: one sync tool stuck in a system call would keep a finished program alive.
These threads are daemons, owned by the awaiting task: if the task is cancelled (a timeout, a
hard abort), the thread is abandoned and the interpreter may exit without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run_in_daemon_thread"]

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, exc: BaseException | None) -> None:
        if future.done():
            return  # the awaiting task gave up on it
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            result, exc = context.run(fn, *args, **kwargs), None
        except BaseException as error:
            result, exc = None, error
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=work, name=f"steerable:{getattr(fn, '__name__', 'call')}",
                     daemon=True).start()
    return await future
