"""A test fails when it leaves a process running (or unreaped) that it started.

Children of the test process are listed after a test's setup and after its teardown. One started by the test body or its teardown and still there afterwards is the test's
leak: the test fails with the command lines, and the process is killed so the next test starts
clean. One started during setup may belong to a wider fixture (a session's Redis server); those
must be gone once the last test has torn down, or the last test fails. A child that exited but
was never waited for (the ``ResourceWarning: subprocess N is still running`` at exit) counts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from typing import Any

import psutil
import pytest

GRACE = 2.0  # seconds for children being stopped or reaped (asyncio reaps in a thread) to go
_after_setup: dict[str, set[int]] = {}
_session_start: set[int] = set()


def _children() -> dict[int, psutil.Process]:
    # This process, asked each time: a test run forked from another (mutmut's runners) must
    # not count its siblings, its parent's other children, as its own.
    # A child can end while psutil walks the tree (it reads each one's start time): ask again.
    for _ in range(10):
        try:
            return {p.pid: p for p in psutil.Process().children(recursive=True)}
        except psutil.NoSuchProcess:
            time.sleep(0.01)
    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def _describe(proc: psutil.Process) -> str:
    try:
        status = proc.status()
    except psutil.Error:
        return f"pid {proc.pid} (gone)"
    if status == psutil.STATUS_ZOMBIE:
        return f"pid {proc.pid} (zombie: exited, never waited for)"
    try:
        return f"pid {proc.pid} ({status}): {' '.join(proc.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {proc.pid} ({status})"


def _settled(allowed: set[int]) -> list[psutil.Process]:
    """Children not in ``allowed`` that are still there after the grace period."""
    deadline = time.monotonic() + GRACE
    while True:
        extra = [p for pid, p in _children().items() if pid not in allowed]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.05)


def _kill(procs: list[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)


def pytest_sessionstart(session: pytest.Session) -> None:
    _session_start.update(_children())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    try:
        return (yield)
    finally:
        _after_setup[item.nodeid] = set(_children())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    result = yield
    after_setup = _after_setup.pop(item.nodeid, set())
    # After the last test every fixture is gone: nothing new may be left at all.
    allowed = _session_start if nextitem is None else after_setup
    leaked = _settled(allowed)
    if leaked:
        lines = "\n  ".join(_describe(p) for p in leaked)
        _kill(leaked)
        pytest.fail(f"the test left {len(leaked)} process(es) running or unreaped:\n  {lines}",
                    pytrace=False)
    return result
