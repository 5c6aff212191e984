"""The session workflow decides the same on every replay, whatever happens and whenever: a
bounded run of the determinism fuzzer (``_fuzz``). Random sessions (sends with every busy
policy, steers, follow-ups, interrupts, cancels, results, revokes, edits, answers, approvals
and closes at random moments of their turns, over tools, subagents and composites) on
workers that replay every step or move mid-run, sessions continued as new or closed when
idle; then no workflow task may have failed on a worker, every history, whole and cut after
each of its workflow tasks, must replay, here and in a process with another
``PYTHONHASHSEED``, and no session coroutine may be left once the workers stopped.

``STEERABLE_FUZZ_SEED`` and ``STEERABLE_FUZZ_SESSIONS`` change the run (a failure prints its
seed); ``bench/bench_determinism.py`` runs many rounds."""

from __future__ import annotations

import os

import pytest

from tests.temporal._fuzz import Plan, fuzz

pytestmark = pytest.mark.timeout(180)

_SEED = int(os.environ.get("STEERABLE_FUZZ_SEED", "20261207"))
_SESSIONS = int(os.environ.get("STEERABLE_FUZZ_SESSIONS", "8"))


@pytest.mark.parametrize(("kind", "cold", "max_history", "idle_close"), [
    ("pipeline", True, 20_000, None),  # a composite at the root, each step a replay
    # Subagents and composite children; sessions continue as new, and close when idle.
    ("main", False, 80, 0.3),
])
async def test_random_sessions_replay_as_they_ran(temporal_target: str, task_queue: str,
                                                  events_url: str, kind: str, cold: bool,
                                                  max_history: int,
                                                  idle_close: float | None) -> None:
    plan = Plan(_SEED, sessions=_SESSIONS, kind=kind, cold=cold, max_history=max_history,
                idle_close=idle_close, prefixes=4)
    report = await fuzz(plan, temporal_target, task_queue, events_url)
    assert report.histories >= _SESSIONS, report.summary()
    assert sum(report.actions.values()) >= 3 * _SESSIONS, report.summary()
    assert not report.failures, report.summary() + "\n\n" + "\n\n".join(report.failures)
