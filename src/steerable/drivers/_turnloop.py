"""``TurnLoop``: a push-based driver. Items arrive at any time; turns consume them.

One session, one turn at a time. ``push`` buffers an item (also before ``run``); when no turn
runs, the input function looks at the buffered items, says which it consumes and what text the
turn gets, and the rest stay buffered. ``push(item, preempt=mode)`` also cancels the running
turn (with that ``CancelMode``): the preempted turn's consumed items go back to the front of the
buffer, so the next turn sees them together with the new one; nothing is dropped. The cancel
is applied to the turn running when the push is made, never to a later one.

``stop()`` lets the running turn finish, ``stop(mode)`` cancels it, a later stronger
``stop(mode)`` escalates. ``wait()`` returns the ``ExitState``: why the loop ended, the items
of a turn the stop cancelled, the items never handled (including those pushed after the stop),
the checkpoint a cancelled turn left (with a store that keeps checkpoints the next ``run()``
of a TurnLoop on that session resumes it) and the error, if one ended the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from steerable._core._agent import BaseAgent
from steerable._core._cancel import CancelHandle, CancelMode
from steerable._core._session import SessionStore
from steerable._core._turn import TurnResult
from steerable._events import TurnStatus
from steerable.drivers._handle import TurnHandle
from steerable.drivers._loop import AgentLoop

__all__ = ["ExitState", "PushAck", "TurnInput", "TurnLoop"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TurnInput(Generic[T]):
    """What the input function decided: the turn's text and the items it consumes."""

    text: str
    consumed: Sequence[T]


@dataclass(frozen=True, slots=True)
class ExitState(Generic[T]):
    reason: str
    """``stopped`` (by ``stop``) or ``error`` (the input function or a turn failed)."""
    canceled_items: tuple[T, ...] = ()
    """Items consumed by the turn the stop cancelled (continued by resuming its checkpoint)."""
    unhandled_items: tuple[T, ...] = ()
    """Items no turn consumed, in push order (also those pushed after the stop)."""
    checkpoint_id: str | None = None
    """The checkpoint a cancelled turn left (``AgentLoop.resume`` continues it)."""
    error: BaseException | None = None
    results: tuple[TurnResult, ...] = field(default=(), repr=False)
    """Every turn's result, in order."""


class PushAck:
    """Completes once the preempting cancel has started (at once when nothing ran).
    ``cancel`` is the handle of that cancel (None when nothing was preempted)."""

    def __init__(self, cancel: CancelHandle | None) -> None:
        self.cancel = cancel

    def done(self) -> bool:
        return True  # push starts the cancel before it returns

    def __await__(self) -> Generator[Any, None, CancelHandle | None]:
        yield from asyncio.sleep(0).__await__()
        return self.cancel


def join_text(items: Sequence[Any]) -> TurnInput[Any]:
    """The default input function: every buffered item, as text, one paragraph each."""
    return TurnInput("\n\n".join(str(item) for item in items), list(items))


InputFn = Callable[[list[T]], "TurnInput[T] | Awaitable[TurnInput[T] | None] | None"]


def _take(buffer: list[T], consumed: Sequence[T]) -> list[T]:
    """Remove each consumed item once from ``buffer`` (identity first, then equality)."""
    taken = []
    for item in consumed:
        index = next((i for i, b in enumerate(buffer) if b is item), None)
        if index is None:
            index = next((i for i, b in enumerate(buffer) if b == item), None)
        if index is None:
            raise ValueError(f"the input function consumed {item!r}, which is not buffered")
        taken.append(buffer.pop(index))
    return taken


class TurnLoop(Generic[T]):
    """Push items at any time; turns of ``agent`` on one session consume them.

    ``input_fn(items)`` returns a ``TurnInput`` (text and the items it consumes) or None to
    wait for more; the default joins every buffered item. ``on_result(result, consumed)`` is
    called after each turn. Give ``loop`` to share an ``AgentLoop`` (its events, hooks,
    store), or ``store`` to make one.
    """

    def __init__(self, agent: BaseAgent | None = None, *, loop: AgentLoop | None = None,
                 store: SessionStore | None = None, session_id: str | None = None,
                 input_fn: InputFn[T] | None = None,
                 on_result: Callable[[TurnResult, list[T]], Any] | None = None) -> None:
        if (agent is None) == (loop is None):
            raise TypeError("TurnLoop needs an agent or an AgentLoop (one of them)")
        if loop is not None and store is not None:
            raise TypeError("give the store to the AgentLoop, not to TurnLoop")
        self.loop = loop if loop is not None else AgentLoop(agent, store=store)  # type: ignore[arg-type]
        self._owns_loop = loop is None
        self.session_id = session_id or f"turnloop_{id(self):x}"
        self._input_fn: InputFn[T] = input_fn or join_text
        self._on_result = on_result
        self._buffer: list[T] = []
        self._late: list[T] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[ExitState[T]] | None = None
        self._handle: TurnHandle | None = None
        self._consumed: list[T] = []
        self._stop_mode: CancelMode | None = None
        self._stopping = False
        self._preempted = False
        self._results: list[TurnResult] = []

    # -- pushing ------------------------------------------------------------------------------

    def push(self, item: T, preempt: CancelMode | None = None) -> tuple[bool, PushAck]:
        """Buffer ``item``; with ``preempt``, also cancel the running turn with that mode.
        Returns ``(accepted, ack)``; after ``stop`` nothing is accepted (the item is reported
        in ``ExitState.unhandled_items``)."""
        if preempt is not None and not isinstance(preempt, CancelMode):
            raise TypeError(f"preempt must be a CancelMode or None, got {preempt!r}")
        answer: tuple[bool, PushAck] = self._on_loop(self._push, item, preempt)
        return answer

    def _push(self, item: T, preempt: CancelMode | None) -> tuple[bool, PushAck]:
        if self._stopping:
            self._late.append(item)
            return False, PushAck(None)
        self._buffer.append(item)
        cancel = None
        if preempt is not None and self._handle is not None and not self._handle.done():
            # The turn running now, and only it: a later turn will consume this item.
            cancel = self._handle.cancel(preempt)
            if cancel.contributed:
                self._preempted = True
        if self._wake is not None:
            self._wake.set()
        return True, PushAck(cancel)

    def _on_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        task = self._task
        owner = task.get_loop() if task is not None else None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if owner is None or running is owner or owner.is_closed():
            return fn(*args)
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def call() -> None:
            try:
                answer.set_result(fn(*args))
            except BaseException as exc:
                answer.set_exception(exc)

        owner.call_soon_threadsafe(call)
        return answer.result(timeout=30)

    # -- lifecycle ----------------------------------------------------------------------------

    def run(self) -> None:
        """Start consuming (in a task on the running event loop). A second call does nothing."""
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._main())

    def stop(self, mode: CancelMode | None = None) -> None:
        """Stop after the running turn (``mode=None``) or cancel it with ``mode``; calling
        again with a stronger mode escalates. Before ``run``, ``run`` then exits at once."""
        if mode is not None and not isinstance(mode, CancelMode):
            raise TypeError(f"mode must be a CancelMode or None, got {mode!r}")
        self._on_loop(self._stop, mode)

    def _stop(self, mode: CancelMode | None) -> None:
        self._stopping = True
        if mode is not None and (self._stop_mode is None or mode > self._stop_mode):
            self._stop_mode = mode
            if self._handle is not None and not self._handle.done():
                self._handle.cancel(mode)
        if self._wake is not None:
            self._wake.set()

    async def wait(self) -> ExitState[T]:
        """Wait until the loop has ended and return its ``ExitState`` (runs it if needed)."""
        self.run()
        assert self._task is not None
        return await asyncio.shield(self._task)

    # -- the loop -----------------------------------------------------------------------------

    async def _main(self) -> ExitState[T]:
        try:
            return await self._consume()
        except Exception as exc:
            return self._exit("error", error=exc)
        finally:
            self._stopping = True
            if self._owns_loop:
                await self.loop.aclose()

    async def _consume(self) -> ExitState[T]:
        assert self._wake is not None
        if not self._stopping and self.loop.checkpoint(self.session_id) is not None:
            handle = self.loop.resume(self.session_id)  # the turn an earlier run left
            if handle is not None:
                stopped = await self._finish_turn(handle, [])
                if stopped is not None:
                    return stopped
        while not self._stopping:
            if not self._buffer:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                decided = self._input_fn(list(self._buffer))
                if asyncio.iscoroutine(decided) or isinstance(decided, asyncio.Future):
                    decided = await decided
            except Exception as exc:
                return self._exit("error", error=exc)  # the items stay, in order
            if decided is None:  # not enough yet: wait for another push
                self._wake.clear()
                await self._wake.wait()
                continue
            assert isinstance(decided, TurnInput)
            consumed = _take(self._buffer, decided.consumed)
            handle = self.loop.start_turn(decided.text, self.session_id,
                                          discard_checkpoint=self._preempted)
            self._preempted = False
            stopped = await self._finish_turn(handle, consumed)
            if stopped is not None:
                return stopped
        return self._exit("stopped")

    async def _finish_turn(self, handle: TurnHandle, consumed: list[T]) -> ExitState[T] | None:
        self._handle, self._consumed = handle, consumed
        if self._stop_mode is not None:  # stopped while the input function ran
            handle.cancel(self._stop_mode)
        try:
            result = await handle
        finally:
            self._handle = None
        self._results.append(result)
        if self._on_result is not None:
            outcome = self._on_result(result, consumed)
            if asyncio.iscoroutine(outcome):
                await outcome
        if result.status in (TurnStatus.CANCELLED, TurnStatus.ABORTED):
            if self._stopping and self._stop_mode is not None:
                return self._exit("stopped", canceled=consumed,
                                  checkpoint_id=result.checkpoint_id)
            # Preempted (or cancelled from outside): its items go first in the next turn,
            # which starts afresh (the cancelled turn's checkpoint is dropped then).
            self._buffer[:0] = consumed
            self._preempted = result.status is TurnStatus.CANCELLED
        for text in result.follow_ups:
            self._buffer.append(text)  # type: ignore[arg-type]
        return None

    def _exit(self, reason: str, *, canceled: Sequence[T] = (), checkpoint_id: str | None = None,
              error: BaseException | None = None) -> ExitState[T]:
        self._stopping = True
        unhandled = (*self._buffer, *self._late)
        return ExitState(reason, tuple(canceled), unhandled, checkpoint_id, error,
                         tuple(self._results))
