"""Cancel modes: how far a turn may go before it stops, and the handles callers wait on.

Design note. A cancel is a request recorded on the turn, never an exception thrown into it,
except ``IMMEDIATE``, which *is* the hard abort (the turn's task is cancelled and rolls back).
The two safe-point modes are looked at only where the turn can stop without losing anything:

    safe point              AFTER_MODEL   AFTER_TOOLS
    before an LLM call      stops         stops        (nothing is in flight)
    after an LLM response   stops         goes on      (its first tool group runs first)
    after a tool group      stops         stops
    before a queued call    stops         goes on      (inside a parallel read-only group)

so no further LLM call is made once either is asked for, and a safe-point stop leaves a
checkpoint from which ``resume`` continues. Requests combine: the strongest wins
(IMMEDIATE > AFTER_MODEL > AFTER_TOOLS), a weaker or equal one changes nothing.

``contributed`` follows the rule of the design this borrows from: a request contributed when
it raised the turn's cancel level before the turn's end was decided, and the turn then ended
by a cancel. It is settled when the turn ends (``wait()`` has returned); a request that came
too late, or a turn that finished normally first, reads False. Composite drivers check
``CancelState.requested`` at the boundaries between children, where any mode stops.
"""

from __future__ import annotations

import asyncio
import enum

__all__ = ["CancelHandle", "CancelMode", "CancelState", "SafePoint"]


class CancelMode(enum.IntEnum):
    """How a cancelled turn stops; ordered by strength (a stronger one wins)."""

    AFTER_TOOLS = 1
    """Stop after the running tool group (or the next one, if the model is still answering)."""
    AFTER_MODEL = 2
    """Stop at the next safe point: after the LLM response, before any of its tools start."""
    IMMEDIATE = 3
    """A hard abort: cancel the LLM call and every tool now and roll back (``aborted``)."""

    @property
    def label(self) -> str:
        """The lowercase name events and checkpoints use (``after_model``...)."""
        return self.name.lower()


class SafePoint(enum.Enum):
    BEFORE_MODEL = "before_model"
    AFTER_MODEL = "after_model"
    AFTER_TOOLS = "after_tools"
    BEFORE_CALL = "before_call"


_STOPS: dict[SafePoint, frozenset[CancelMode]] = {
    SafePoint.BEFORE_MODEL: frozenset({CancelMode.AFTER_MODEL, CancelMode.AFTER_TOOLS}),
    SafePoint.AFTER_MODEL: frozenset({CancelMode.AFTER_MODEL}),
    SafePoint.AFTER_TOOLS: frozenset({CancelMode.AFTER_MODEL, CancelMode.AFTER_TOOLS}),
    SafePoint.BEFORE_CALL: frozenset({CancelMode.AFTER_MODEL}),
}


class CancelHandle:
    """One ``cancel`` call. ``await handle.wait()`` returns once the turn has stopped."""

    def __init__(self, mode: CancelMode, turn_id: str, raised: bool,
                 ended: asyncio.Future[None] | None) -> None:
        self.mode = mode
        self.turn_id = turn_id
        self._raised = raised
        self._ended = ended
        self._settled: bool | None = None if ended is not None else False

    @property
    def contributed(self) -> bool:
        """True when this call changed how the turn ends (settled once the turn ended;
        before that, whether it raised the cancel level)."""
        return self._raised if self._settled is None else self._settled

    def done(self) -> bool:
        return self._ended is None or self._ended.done()

    async def wait(self) -> bool:
        """Wait until the turn has stopped (and saved or rolled back); returns
        ``contributed``. Bound it with ``asyncio.timeout``: cancelling the wait leaves the
        cancel requested."""
        if self._ended is not None and not self._ended.done():
            await asyncio.shield(self._ended)
        return self.contributed

    def _settle(self, ended_by: CancelMode | None) -> None:
        self._settled = self._raised and ended_by is not None

    def __repr__(self) -> str:
        return f"<CancelHandle {self.mode.label} turn={self.turn_id} contributed={self.contributed}>"


class CancelState:
    """The cancel requests of one turn (touched only from the loop's thread)."""

    __slots__ = ("_ended", "_handles", "ended_by", "requested", "settled")

    def __init__(self) -> None:
        self.requested: CancelMode | None = None
        self.ended_by: CancelMode | None = None
        self.settled = False
        # A tuple, replaced on each call: nearly no turn is cancelled, and an empty list is
        # an object the collector tracks per live turn.
        self._handles: tuple[CancelHandle, ...] = ()
        self._ended: asyncio.Future[None] | None = None

    def request(self, mode: CancelMode, turn_id: str, open_: bool) -> CancelHandle:
        """Record ``mode``. ``open_`` is False once the turn's end is decided: the call is
        then too late and contributes nothing."""
        if self.settled:  # the turn is over: nothing to wait for
            return CancelHandle(mode, turn_id, False, None)
        if self._ended is None:
            self._ended = asyncio.get_running_loop().create_future()
        raised = open_ and (self.requested is None or mode > self.requested)
        if raised:
            self.requested = mode
        handle = CancelHandle(mode, turn_id, raised, self._ended)
        self._handles += (handle,)
        return handle

    def stops_at(self, point: SafePoint) -> CancelMode | None:
        """The safe-point mode that stops the turn here, if any."""
        mode = self.requested
        return mode if mode is not None and mode in _STOPS[point] else None

    def settle(self, ended_by: CancelMode | None) -> None:
        """The turn ended (by ``ended_by``, or normally): settle every handle, wake waiters."""
        self.ended_by = ended_by
        self.settled = True
        for handle in self._handles:
            handle._settle(ended_by)
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)
