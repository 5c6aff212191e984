"""The turn body of a composite agent: children run as sub-turns, with a boundary check between.

A composite agent (``SequentialAgent``, ``LoopAgent``, ``ParallelAgent`` in the drivers layer)
subclasses ``CompositeAgent`` and writes ``run(scope)``; ``run_turn`` calls ``run_composite``
instead of the model loop. Every child goes through ``scope.run_child``, a synchronous sub-turn
on the same engine (same events, limits and interrupts).

Boundaries: before each child starts (and before a parallel group is spawned) no child work is
in progress, so any stop request is honoured there: a graceful interrupt ends the composite
``interrupted`` with the text it has so far. ``boundary_stop`` is the one place that reads stop
requests. A hard abort needs no boundary: it cascades to the running children at once.
Cancels (``CancelMode``) reach running children too: a safe-point mode is passed on as is, and
IMMEDIATE is passed on as AFTER_MODEL with ``grace`` seconds to stop before the hard abort;
the composite then ends ``aborted`` (rolled back) as IMMEDIATE says.
"""

from __future__ import annotations

import asyncio
from typing import Any

from steerable._core._agent import BaseAgent
from steerable._core._cancel import CancelMode
from steerable._core._engine import Engine
from steerable._core._subturn import spawn
from steerable._core._turn_state import Interrupt, TurnState
from steerable._events import TurnPhase, TurnStatus
from steerable._messages import Message
from steerable.errors import ConfigurationError

__all__ = ["USABLE", "BoundaryStop", "CompositeAgent", "CompositeScope", "boundary_stop",
           "run_composite"]

USABLE = (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS, TurnStatus.INTERRUPTED,
          TurnStatus.BUDGET_EXCEEDED)
"""Child statuses whose text is an answer (the others failed, or were stopped)."""


class BoundaryStop(Exception):
    """Raised by ``CompositeScope.check`` when the composite must stop at this boundary."""

    def __init__(self, status: TurnStatus) -> None:
        super().__init__(status.value)
        self.status = status


def boundary_stop(st: TurnState) -> TurnStatus | None:
    """How the composite turn ``st`` must end at a boundary, or None to go on."""
    if st.control.interrupt is Interrupt.HARD:
        return TurnStatus.ABORTED
    if st.control.interrupt is Interrupt.GRACEFUL:
        return TurnStatus.INTERRUPTED
    requested = None if st.control.cancel is None else st.control.cancel.requested
    if requested is CancelMode.IMMEDIATE:  # its children stopped within the grace period
        return TurnStatus.ABORTED
    if requested is not None:  # no child runs here: every cancel mode stops
        return TurnStatus.CANCELLED
    return None


class CompositeScope:
    """What a composite's ``run`` works with: its input, its limits, and ``run_child``."""

    def __init__(self, engine: Engine, st: TurnState) -> None:
        self._engine = engine
        self._state = st
        self.text = ""
        """The latest usable child output: the composite's answer if it is stopped early."""

    @property
    def input(self) -> str:
        return self._state.input

    @property
    def max_parallel(self) -> int:
        """Children that may run at once under this turn (``Limits.subturns_per_turn``)."""
        return self._engine.limits.subturns_per_turn

    def stopping(self) -> bool:
        """True when the turn must not start another child (a stop request is pending)."""
        return boundary_stop(self._state) is not None

    def check(self) -> None:
        """A boundary: raise ``BoundaryStop`` if the turn must stop here."""
        status = boundary_stop(self._state)
        if status is not None:
            raise BoundaryStop(status)

    async def run_child(self, agent: BaseAgent, task: str, *, check: bool = True) -> Any:
        """Run ``agent`` on ``task`` as a sub-turn and return its ``TurnResult``. With
        ``check`` (not for a parallel group, which checks once before it starts) the boundaries
        before and after the child are checked, and a usable answer becomes ``text``."""
        if check:
            self.check()
        handle = spawn(self._engine, self._state, agent, task, is_async=False, deliver=False)
        try:
            # Shielded: the child ends itself on abort and returns a result, which must not
            # swallow this waiter's own cancellation.
            result = await handle
        except asyncio.CancelledError:
            handle.interrupt_hard()  # whoever cancelled this wait, the child goes with it
            raise
        if check:
            if result.status in USABLE:
                self.text = result.text
            self.check()  # a stop asked for while the child ran: honoured before its result is used
        return result


class CompositeAgent(BaseAgent):
    """An agent whose turn runs other agents as sub-turns instead of calling a model.

    ``grace``: on an IMMEDIATE cancel, how long running children get to stop at their next
    safe point (they are cancelled AFTER_MODEL) before they are hard-aborted."""

    agents: tuple[BaseAgent, ...]
    grace: float = 1.0

    def _set_grace(self, grace: object) -> None:
        if isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0:
            raise ConfigurationError(
                f"{type(self).__name__} {self.name!r}: grace must be a number of seconds >= 0, "
                f"got {grace!r}")
        self.grace = float(grace)

    async def run(self, scope: CompositeScope) -> str:
        """Run the children through ``scope.run_child``; return the composite's answer."""
        raise NotImplementedError


async def run_composite(engine: Engine, st: TurnState) -> TurnStatus:
    """The composite's turn body: its answer becomes the turn's assistant message."""
    engine.set_phase(st, TurnPhase.EXECUTING)
    scope = CompositeScope(engine, st)
    agent = st.agent
    if not isinstance(agent, CompositeAgent):
        raise TypeError(f"turn {st.turn_id} runs {type(agent).__name__}, not a composite agent")
    st.control.grace = agent.grace
    try:
        text = await agent.run(scope)
        # A stop that came while the last children ran found no boundary left: the answer is
        # whole, but the turn still ends as the caller asked.
        status = boundary_stop(st) or TurnStatus.COMPLETED
    except BoundaryStop as stop:
        text, status = scope.text, stop.status
    finally:
        if st.control.grace_timer is not None:
            st.control.grace_timer.cancel()
    if status is TurnStatus.ABORTED:
        raise asyncio.CancelledError  # the hard-abort path of run_turn: roll back
    st.transcript.new.append(Message("assistant", text))
    return status
