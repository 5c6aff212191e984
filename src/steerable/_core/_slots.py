"""``Limits.active_turns``: how many turns (top-level and sub-turns) may run at once.

This is the one count of running turns: the turn phases take and give back slots, the lanes
ask ``has_room`` before starting a queued message's turn, and ``AgentLoop.statistics`` reports
``running``. A slot is held by a turn id from the moment the turn is begun (or, past the limit,
from the moment a slot is handed to it) until its task ends; with no limit every take succeeds,
and the count is kept all the same.

A top-level turn waits for a slot (first come, first served) before it does any work; a
sub-turn is refused at once instead, since its parent holds a slot while it waits and waiting
could then deadlock.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["TurnSlots"]


class TurnSlots:
    __slots__ = ("_holders", "_room", "_waiters", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._holders: set[str] = set()
        self._waiters: deque[tuple[asyncio.Future[None], str]] = deque()
        self._room: list[asyncio.Future[None]] = []
        """Futures of those waiting for a slot to be given back (``room``)."""

    # -- reading ------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Turns holding a slot now: the turns running (``statistics().active_turns``)."""
        return len(self._holders)

    @property
    def waiting(self) -> int:
        """Turns begun and waiting for a slot."""
        return len(self._waiters)

    def holds(self, turn_id: str) -> bool:
        return turn_id in self._holders

    def has_room(self) -> bool:
        """True when one more turn would run at once, without waiting behind anyone."""
        return self.limit is None or len(self._holders) + len(self._waiters) < self.limit

    async def room(self) -> None:
        """Wait until a slot is given back (then ask ``has_room`` again: it may be taken)."""
        waiter = asyncio.get_running_loop().create_future()
        self._room.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._room:
                self._room.remove(waiter)

    # -- taking and giving back ---------------------------------------------------------------

    def try_take(self, turn_id: str) -> bool:
        """Take a slot for ``turn_id`` now if one is free and nobody waits for one."""
        if turn_id in self._holders:
            return True
        if self.limit is not None and (len(self._holders) >= self.limit or self._waiters):
            return False
        self._holders.add(turn_id)
        return True

    async def take(self, turn_id: str) -> None:
        """Wait for a slot for ``turn_id``. Cancelled while waiting, it takes none."""
        if self.try_take(turn_id):
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (waiter, turn_id)
        self._waiters.append(entry)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give_back(turn_id)  # handed a slot in the same instant: pass it on
            else:
                self._waiters.remove(entry)
            raise

    def give_back(self, turn_id: str) -> None:
        """``turn_id`` ended: its slot goes to the first waiter, or is free. A no-op when it
        holds none."""
        if turn_id not in self._holders:
            return
        self._holders.discard(turn_id)
        while self._waiters:
            waiter, next_id = self._waiters.popleft()
            if not waiter.done():
                self._holders.add(next_id)  # the slot moves to the waiter, counted at once
                waiter.set_result(None)
                return
        for waiter in self._room:
            if not waiter.done():
                waiter.set_result(None)
        self._room.clear()
