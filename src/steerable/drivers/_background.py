"""Session summaries a turn's end starts in the background (``SummaryPolicy``).

At most one per session at a time; the tasks are owned here, and ``AgentLoop.aclose`` cancels
what is still running.
"""

from __future__ import annotations

import asyncio

from steerable._core._agent import Agent
from steerable._core._engine import Engine
from steerable._core._turn import TurnResult
from steerable._core._turn_state import TurnState
from steerable._events import TurnStatus

__all__ = ["Summaries"]


class Summaries:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.tasks: set[asyncio.Task[bool]] = set()
        self._sessions: set[str] = set()

    def maybe_start(self, st: TurnState, result: TurnResult) -> None:
        policy = st.agent.summary if isinstance(st.agent, Agent) else None
        if policy is None or result.status in (TurnStatus.ABORTED, TurnStatus.ERROR):
            return
        if st.session_id in self._sessions:
            return
        # Imported by the first agent with a summary policy: most loops never summarise.
        from steerable._core._summarize import needs_summary, summarize_session

        # The estimate uses what the turn already holds: no store read on the hot path.
        if not needs_summary([*st.transcript.base, *st.transcript.new], policy):
            return
        self._sessions.add(st.session_id)
        task = asyncio.get_running_loop().create_task(summarize_session(self._engine, st, policy))
        self.tasks.add(task)

        def done(t: asyncio.Task[bool]) -> None:
            self.tasks.discard(t)
            self._sessions.discard(st.session_id)

        task.add_done_callback(done)
