"""Calls that must run on one worker: the one that holds the state they need.

Most state a tool call needs travels with it or lives where every worker reads it (the session
in the workflow, the files in the workspace, a verdict in ``CarriedState``). A background
command cannot travel: it is a process on one machine. So each worker has a *home*, a task
queue of its own beside the shared one (``TemporalWorker(home=...)``), and a tool whose call
needs a worker's state says which home (``BaseTool.home_of``; the background commands' ids end
in their worker's home: ``bg1@3fa2c1``). The workflow sends such a call to that queue.

A worker that is gone has no poller on its home queue: the call waits ``CallOptions.home_wait``
to be taken, then the model reads that the worker (and what it ran) is gone, instead of the
turn hanging. Hooks that hold such state too (``at_every_home``: the background commands' hook,
which stops a hard-aborted turn's commands) get their events on every home that ran one of the
turn's calls (``Homes``), not on whichever worker the shared queue picks.
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

from steerable.errors import ConfigurationError
from steerable.tools._base import valid_home

__all__ = ["Homes", "check_home", "home_queue", "never_taken"]

def check_home(home: str) -> str:
    if not valid_home(home):
        raise ConfigurationError(f"a worker's home is 1-64 letters, digits, '-' or '_', got {home!r}")
    return home


def home_queue(task_queue: str, home: str) -> str:
    """The task queue of the worker whose home is ``home``."""
    return f"{task_queue}@{home}"


def never_taken(exc: ActivityError) -> bool:
    """The call waited its ``schedule_to_start`` time and no worker took it: on a home queue,
    that worker is gone."""
    cause = exc.cause
    return isinstance(cause, TimeoutError) and cause.type is TimeoutType.SCHEDULE_TO_START


_KEEP_TURNS = 64
"""Turns whose homes are kept: a turn's events (its end) come while it is among the newest;
a session's workflow runs for many turns, so older ones are let go."""


class Homes:
    """The homes that ran each turn's calls, in the order first seen (one workflow run's;
    rebuilt by replay from the calls' recorded results)."""

    def __init__(self) -> None:
        self._by_turn: dict[str, list[str]] = {}

    def seen(self, turn_id: str, home: object) -> None:
        if not isinstance(home, str) or not home:
            return
        homes = self._by_turn.get(turn_id)
        if homes is None:
            homes = self._by_turn[turn_id] = []
            if len(self._by_turn) > _KEEP_TURNS:
                del self._by_turn[next(iter(self._by_turn))]
        if home not in homes:
            homes.append(home)

    def of(self, turn_id: str) -> tuple[str, ...]:
        return tuple(self._by_turn.get(turn_id, ()))
