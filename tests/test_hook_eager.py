"""Async hook methods run up to their first wait in the caller's task; only the ones that wait
get a task of their own. These tests pin what must not change because of that: values,
errors, timeouts, cancellation and context isolation."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from steerable._core._hook_manager import HookFailure, HookManager
from steerable._core._reaper import Reaper

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="caller")


def _manager() -> tuple[HookManager, list[str]]:
    reports: list[str] = []
    return HookManager(Reaper(), lambda message, ctx, source: reports.append(message)), reports


class Hooks:
    def __init__(self) -> None:
        self.steps: list[str] = []

    async def before_llm(self, ctx: Any) -> Any:  # returns at once
        VAR.set("hook")
        self.steps.append(VAR.get())
        return "at once"

    async def after_llm(self, ctx: Any) -> Any:  # waits several times, then returns
        VAR.set("hook")
        for _ in range(3):
            await asyncio.sleep(0)
        self.steps.append(VAR.get())
        return "after waiting"

    async def before_tool(self, ctx: Any) -> Any:  # raises after a wait
        await asyncio.sleep(0)
        raise RuntimeError("late")

    async def after_tool(self, ctx: Any) -> Any:  # raises before any wait
        raise asyncio.CancelledError

    async def approve_tool(self, ctx: Any) -> Any:  # waits past its timeout
        await asyncio.sleep(10)


async def test_values_and_context_whether_or_not_the_hook_waits() -> None:
    manager, reports = _manager()
    hooks = Hooks()
    reg = manager.register(hooks, 0, None)
    created: list[Any] = []
    loop = asyncio.get_running_loop()
    original = loop.create_task

    def counting(coro: Any, **kw: Any) -> Any:
        created.append(coro)
        return original(coro, **kw)

    loop.create_task = counting  # type: ignore[method-assign]
    try:
        assert await manager.call(reg, "before_llm", None, 5) == "at once"
        assert created == []  # no task for a hook that did not wait
        assert await manager.call(reg, "after_llm", None, 5) == "after waiting"
        assert len(created) == 1
    finally:
        loop.create_task = original  # type: ignore[method-assign]
    assert hooks.steps == ["hook", "hook"]  # the hook saw its own value across its waits...
    assert VAR.get() == "caller"  # ...and the caller's context never changed
    assert reports == []


async def test_errors_before_and_after_a_wait_are_contained_and_reported() -> None:
    manager, reports = _manager()
    reg = manager.register(Hooks(), 0, None)
    late = await manager.call(reg, "before_tool", None, 5)
    at_once = await manager.call(reg, "after_tool", None, 5)
    assert isinstance(late, HookFailure) and "RuntimeError: late" in late.message
    assert isinstance(at_once, HookFailure) and "CancelledError" in at_once.message
    assert len(reports) == 2


async def test_a_hook_that_waits_too_long_times_out_and_is_reaped() -> None:
    manager, reports = _manager()
    reaper = manager._reaper
    reg = manager.register(Hooks(), 0, None)
    out = await manager.call(reg, "approve_tool", None, 0.05)
    assert isinstance(out, HookFailure) and "timed out" in out.message
    assert len(reaper) == 1
    await reaper.aclose(grace=0.1)


async def test_cancelling_the_caller_hands_a_waiting_hook_to_the_reaper() -> None:
    manager, _ = _manager()
    reaper = manager._reaper
    reg = manager.register(Hooks(), 0, None)
    call = asyncio.ensure_future(manager.call(reg, "approve_tool", None, 5))
    await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert len(reaper) == 1
    await reaper.aclose(grace=0.1)


class _Unhashable:
    """A hook point given as a callable object that cannot be a key (``__eq__`` without
    ``__hash__``): whether it is ``async def`` is asked each time instead of kept."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __eq__(self, other: object) -> bool:
        return other is self

    def __call__(self, ctx: Any) -> Any:
        self.seen.append(ctx)
        return "called"


async def test_a_hook_point_of_any_callable_shape_is_called() -> None:
    manager, reports = _manager()

    class Mixed:
        on_event = _Unhashable()

        async def before_llm(self, ctx: Any) -> Any:
            return None

        def after_llm(self, ctx: Any) -> Any:
            return "sync"

    hook = Mixed()
    reg = manager.register(hook, 0, None)
    for _ in range(2):  # the second call answers from what the first kept
        assert await manager.call(reg, "on_event", "e", 5.0) == "called"
        assert await manager.call(reg, "before_llm", "c", 5.0) is None
        assert await manager.call(reg, "after_llm", "c", 5.0) == "sync"
    assert Mixed.on_event.seen == ["e", "e"] and reports == []
