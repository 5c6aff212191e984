"""Thread marshalling: the loop's state is touched from its asyncio thread only.

``LoopBinding`` ties an ``AgentLoop`` to the asyncio event loop it is first used from (and
refuses any other); its ``call`` runs work there from any thread.
``call_on(loop, fn, *args)`` runs ``fn`` on ``loop``'s thread and returns its answer: at once
when called there (or before the loop was bound: no other thread can race yet), otherwise
scheduled with ``call_soon_threadsafe`` and waited for, for as long as the loop lives.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["LoopBinding", "call_on"]

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


class LoopBinding:
    """The asyncio event loop an ``AgentLoop`` belongs to, once it is known.

    Each of ``on_bind(loop)`` runs once, in order, on the first ``bind`` (the event bus and the
    observers start there)."""

    def __init__(self, *on_bind: Callable[[asyncio.AbstractEventLoop], None]) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._on_bind = on_bind

    def bind(self) -> asyncio.AbstractEventLoop:
        """The running event loop, bound on first use; ``RuntimeError`` from another one."""
        loop = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = loop
            for started in self._on_bind:
                started(loop)
        elif loop is not self.loop:
            raise RuntimeError("this AgentLoop is bound to another asyncio event loop")
        return loop

    def bind_if_running(self, what: str) -> None:
        """Bind now if not yet bound; ``what`` needs a running event loop to do so."""
        if self.loop is not None:
            return  # bound already: ``call`` runs the work on that loop's thread
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(f"{what} needs a running asyncio event loop") from None
        self.bind()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the bound loop's thread and return its answer."""
        loop = self.loop
        if loop is None or loop is asyncio._get_running_loop():  # on its thread (or unbound)
            return fn(*args)  # (``call_on``'s first answer, without its call: aborts use it)
        return call_on(loop, fn, *args)
