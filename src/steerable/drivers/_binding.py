"""Thread marshalling: the loop's state is touched from its asyncio thread only.

``call_on(loop, fn, *args)`` runs ``fn`` on ``loop``'s thread and returns its answer: at once
when called there (or before the loop was bound: no other thread can race yet), otherwise
scheduled with ``call_soon_threadsafe`` and waited for, for as long as the loop lives.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["call_on"]

T = TypeVar("T")


def call_on(loop: asyncio.AbstractEventLoop | None, fn: Callable[..., T], *args: Any) -> T:
    if loop is None:
        return fn(*args)  # nothing has run yet: there is no other thread to race with
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return fn(*args)
    if loop.is_closed() or not loop.is_running():
        raise RuntimeError("the AgentLoop's event loop is not running")
    answer: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            answer.set_result(fn(*args))
        except BaseException as exc:
            answer.set_exception(exc)

    loop.call_soon_threadsafe(run)
    # Wait as long as the loop lives (its answer needs it), never a fixed time: a loop that
    # stops or closes before running ``run`` fails the call at once instead of after 30 s.
    while True:
        try:
            return answer.result(timeout=0.05)
        except concurrent.futures.TimeoutError:
            if not answer.done() and (loop.is_closed() or not loop.is_running()):
                raise RuntimeError(
                    "the AgentLoop's event loop stopped before it could answer") from None
